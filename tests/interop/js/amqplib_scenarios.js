'use strict';
// amqplib (the Node.js AMQP 0-9-1 client) scenarios for tests/interop/test_amqplib.py.
//
// One JSON argument: {url, scenario, timeout_ms, ...}.  The scenario runs against the broker at
// `url` and the script prints one JSON line: what the client saw ({result} or {error}).  A hard
// deadline (`timeout_ms`) ends a scenario that hangs, printing {timed_out: true}.

const amqp = require('amqplib');

const args = JSON.parse(process.argv[2] || '{}');

function wait(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

// Resolve with the first `count` messages a consumer on `queue` receives (not acknowledged).
function collect(channel, queue, count, options = {}) {
    return new Promise((resolve, reject) => {
        const got = [];
        channel.consume(queue, (message) => {
            got.push(message);
            if (got.length === count) resolve(got);
        }, options).catch(reject);
    });
}

function seen(message) {
    return {
        body: message.content.toString(),
        redelivered: message.fields.redelivered,
        delivery_tag: message.fields.deliveryTag,
        routing_key: message.fields.routingKey,
        exchange: message.fields.exchange,
    };
}

const scenarios = {
    // Connection tuning as the client sees it, then idle for longer than two heartbeat
    // intervals: a broker that did not heartbeat (or took the client's for silence) ends it.
    async tune(url) {
        const connection = await amqp.connect(url);
        const tuned = {
            heartbeat: connection.connection.heartbeat,
            frame_max: connection.connection.frameMax,
            channel_max: connection.connection.channelMax,
            product: connection.connection.serverProperties.product,
        };
        let closed = null;
        connection.on('error', (error) => { closed = String(error); });
        connection.on('close', (error) => { closed = closed || String(error || 'closed'); });
        await wait(args.idle_ms || 0);
        const channel = await connection.createChannel();
        await channel.assertQueue('after-idle');
        const big = Buffer.alloc(args.body_size || 1, 'b');
        channel.sendToQueue('after-idle', big);
        const message = await collect(channel, 'after-idle', 1, {noAck: true});
        tuned.closed_while_idle = closed;
        tuned.big_body_size = message[0].content.length;
        await channel.deleteQueue('after-idle');
        await connection.close();
        return tuned;
    },

    // assertQueue, sendToQueue, consume, then ack one, nack-requeue one, nack-drop one.
    async settle(url) {
        const connection = await amqp.connect(url);
        const channel = await connection.createChannel();
        const declared = await channel.assertQueue('work', {durable: true, arguments: {'x-max-length': 100}});
        for (const body of ['a', 'b', 'c']) channel.sendToQueue('work', Buffer.from(body), {persistent: true});
        const [a, b, c] = await collect(channel, 'work', 3, {consumerTag: 'first'});
        await channel.cancel('first');
        channel.ack(a);
        channel.nack(b, false, true);   // requeued: comes again, redelivered
        channel.nack(c, false, false);  // dropped
        const [again] = await collect(channel, 'work', 1);
        channel.ack(again);
        const checked = await channel.checkQueue('work');
        await channel.deleteQueue('work');
        await connection.close();
        return {
            declared: {queue: declared.queue, message_count: declared.messageCount, consumer_count: declared.consumerCount},
            first: [a, b, c].map(seen),
            // amqplib sends an empty headers table with every publish; RabbitMQ gives it back.
            headers: a.properties.headers === undefined ? 'absent' : a.properties.headers,
            again: seen(again),
            left: checked.messageCount,
        };
    },

    // A confirm channel: each publish acked; a publish a full reject-publish queue refuses, nacked.
    async confirms(url) {
        const connection = await amqp.connect(url);
        const channel = await connection.createConfirmChannel();
        await channel.assertQueue('confirmed', {arguments: {'x-max-length': 1, 'x-overflow': 'reject-publish'}});
        const outcome = (body) => new Promise((resolve) => {
            channel.sendToQueue('confirmed', Buffer.from(body), {}, (error) => resolve(error ? 'nack' : 'ack'));
        });
        const outcomes = await Promise.all([outcome('1'), outcome('2')]);
        let waited = 'ok';
        channel.sendToQueue('confirmed', Buffer.from('3'));
        try {
            await channel.waitForConfirms();
        } catch (error) {
            waited = 'nacked';
        }
        await channel.deleteQueue('confirmed');
        await connection.close();
        return {outcomes, wait_for_confirms: waited};
    },

    // A burst of publishes on a confirm channel: how many acks covered several publishes
    // (``multiple``, as RabbitMQ coalesces confirms ready together), then a burst closed at once:
    // every ack must come before the close-ok (amqplib drops a frame on a closed channel with
    // "Frame on unknown channel", an uncaught error).
    async confirm_burst(url) {
        const uncaught = [];
        process.on('uncaughtException', (error) => uncaught.push(String(error.message || error)));
        const connection = await amqp.connect(url);
        const channel = await connection.createConfirmChannel();
        await channel.assertQueue('burst');
        let acks = 0;
        let multiple = 0;
        channel.on('ack', (ack) => {
            acks += 1;
            if (ack.multiple) multiple += 1;
        });
        for (let i = 0; i < 200; i++) channel.sendToQueue('burst', Buffer.from('x'));
        await channel.waitForConfirms();
        const closing = await connection.createConfirmChannel();
        for (let i = 0; i < 200; i++) closing.sendToQueue('burst', Buffer.from('y'));
        await closing.close();
        await wait(args.settle_ms || 300);  // a late ack on the closed channel would fail here
        const queued = (await channel.checkQueue('burst')).messageCount;
        await channel.deleteQueue('burst');
        await connection.close();
        return {coalesced: acks < 200 && multiple > 0, queued, uncaught};
    },

    // prefetch(2): two deliveries until one is acknowledged, then the next.
    async prefetch(url) {
        const connection = await amqp.connect(url);
        const channel = await connection.createChannel();
        await channel.assertQueue('window');
        for (let i = 0; i < 5; i++) channel.sendToQueue('window', Buffer.from(String(i)));
        await channel.prefetch(2);
        const got = [];
        await channel.consume('window', (message) => got.push(message));
        await wait(args.settle_ms || 300);  // a third delivery would be here by now if the window let it out
        const before = got.map((m) => m.content.toString());
        channel.ack(got[0]);
        // The ack opens the window for one more: wait for it (the deadline ends a broker that never sends it).
        while (got.length < 3) await wait(10);
        await wait(args.settle_ms || 300);  // and no fourth
        const after = got.map((m) => m.content.toString());
        await channel.deleteQueue('window');
        await connection.close();
        return {before, after};
    },

    // get: a message, then get-empty (false); the got message acknowledged.
    async get(url) {
        const connection = await amqp.connect(url);
        const channel = await connection.createChannel();
        await channel.assertQueue('polled');
        channel.sendToQueue('polled', Buffer.from('only'), {contentType: 'text/plain', headers: {k: 'v'}});
        await wait(50);
        const message = await channel.get('polled');
        const empty = await channel.get('polled');
        channel.ack(message);
        const checked = await channel.checkQueue('polled');
        await channel.deleteQueue('polled');
        await connection.close();
        return {
            message: seen(message),
            content_type: message.properties.contentType,
            headers: message.properties.headers,
            message_count: message.fields.messageCount,
            empty,
            left: checked.messageCount,
        };
    },

    // A channel error as amqplib reports it: a passive declare of a missing queue.
    async missing(url) {
        const connection = await amqp.connect(url);
        const channel = await connection.createChannel();
        let error = null;
        channel.on('error', () => {});
        try {
            await channel.checkQueue('missing');
        } catch (caught) {
            error = {code: caught.code, message: caught.message};
        }
        const other = await connection.createChannel();
        const declared = await other.assertQueue('');
        await connection.close();
        return {error, server_named: declared.queue.startsWith('amq.gen-')};
    },
};

async function main() {
    const deadline = setTimeout(() => {
        console.log(JSON.stringify({timed_out: true}));
        process.exit(0);
    }, args.timeout_ms || 10000);
    try {
        const result = await scenarios[args.scenario](args.url);
        console.log(JSON.stringify({result}));
    } catch (error) {
        console.log(JSON.stringify({error: String(error && error.stack || error)}));
    }
    clearTimeout(deadline);
    process.exit(0);
}

main();
