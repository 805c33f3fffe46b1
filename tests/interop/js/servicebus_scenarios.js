'use strict';
// @azure/service-bus scenarios against minibroker. No message sets messageId (the service gives one).
// Argument: {"scenario": name, "connection_string": ..., "timeout_ms": ..., ...scenario arguments}
// Result: {"error": ..., ...what the scenario observed}
// No retries; a hard deadline (a hang guard, generous so a loaded machine never reaches it) prints
// {"timed_out": true} and exits.

const {ServiceBusClient} = require('@azure/service-bus');

const WAIT = {maxWaitTimeInMs: 5000};

function seen(message) {
    return {
        body: message.body,
        message_id: message.messageId === undefined ? null : String(message.messageId),
        sequence_number: Number(message.sequenceNumber),
        delivery_count: message.deliveryCount,
        properties: message.applicationProperties || {},
        subject: message.subject === undefined ? null : message.subject,
        reason: message.deadLetterReason === undefined ? null : message.deadLetterReason,
    };
}

function nextStdinLine() {
    return new Promise((resolve) => {
        process.stdin.once('data', () => {
            process.stdin.pause();
            resolve();
        });
    });
}

async function listed(iterator) {
    const items = [];
    for await (const item of iterator) items.push(item);
    return items;
}

const scenarios = {
    // complete, abandon, dead-letter and defer messages the sender gave no id.
    async settle(client, args, result) {
        const sender = client.createSender(args.queue);
        await sender.sendMessages(['complete', 'abandon', 'dead-letter', 'defer'].map((body) => ({body})));
        await sender.close();
        const receiver = client.createReceiver(args.queue);
        const [done, abandoned, dead, deferred] = await receiver.receiveMessages(4, WAIT);
        result.first = [done, abandoned, dead, deferred].map(seen);
        await receiver.completeMessage(done);
        await receiver.abandonMessage(abandoned);
        await receiver.deadLetterMessage(dead, {deadLetterReason: 'bad', deadLetterErrorDescription: 'unreadable'});
        await receiver.deferMessage(deferred);
        const [again] = await receiver.receiveMessages(1, WAIT);
        result.again = seen(again);
        await receiver.completeMessage(again);
        const [later] = await receiver.receiveDeferredMessages([deferred.sequenceNumber]);
        result.deferred = seen(later);
        await receiver.completeMessage(later);
        await receiver.close();
        const dlq = client.createReceiver(args.queue, {subQueueType: 'deadLetter'});
        const [letter] = await dlq.receiveMessages(1, WAIT);
        result.dead_letter = seen(letter);
        await dlq.completeMessage(letter);
        await dlq.close();
    },
    // abandon one message until the broker dead-letters it.
    async poison(client, args, result) {
        const sender = client.createSender(args.queue);
        await sender.sendMessages({body: 'poison'});
        await sender.close();
        const receiver = client.createReceiver(args.queue);
        result.delivery_counts = [];
        for (let i = 0; i < args.attempts; i++) {
            const messages = await receiver.receiveMessages(1, {maxWaitTimeInMs: 1000});
            if (messages.length === 0) break;
            result.delivery_counts.push(messages[0].deliveryCount);
            await receiver.abandonMessage(messages[0]);
        }
        await receiver.close();
        const dlq = client.createReceiver(args.queue, {subQueueType: 'deadLetter'});
        const [letter] = await dlq.receiveMessages(1, WAIT);
        result.dead_letter = seen(letter);
        await dlq.completeMessage(letter);
        await dlq.close();
    },
    // send to a topic, receive each subscription's copy.
    async topic(client, args, result) {
        const sender = client.createSender(args.topic);
        await sender.sendMessages(args.bodies.map((body) => ({body, applicationProperties: {color: body}})));
        await sender.close();
        result.received = {};
        for (const subscription of args.subscriptions) {
            const receiver = client.createReceiver(args.topic, subscription);
            const messages = await receiver.receiveMessages(10, {maxWaitTimeInMs: 1000});
            result.received[subscription] = messages.map((message) => message.body);
            for (const message of messages) await receiver.completeMessage(message);
            await receiver.close();
        }
    },
    // a queue with duplicate detection: the same messageId twice is kept once.
    async duplicates(client, args, result) {
        const sender = client.createSender(args.queue);
        await sender.sendMessages({body: 'first', messageId: 'same'});
        await sender.sendMessages([{body: 'again', messageId: 'same'}, {body: 'other', messageId: 'other'}]);
        await sender.close();
        const receiver = client.createReceiver(args.queue);
        const messages = await receiver.receiveMessages(10, {maxWaitTimeInMs: 1000});
        result.received = messages.map((message) => message.body);
        for (const message of messages) await receiver.completeMessage(message);
        await receiver.close();
    },
    // a session lock that is not renewed expires: the test moves the broker's clock on between the
    // line {"ready": true} and the line it then writes to stdin.
    async sessionExpiry(client, args, result) {
        const sender = client.createSender(args.queue);
        await sender.sendMessages({body: 's1', sessionId: 'a'});
        await sender.close();
        const receiver = await client.acceptSession(args.queue, 'a', {maxAutoLockRenewalDurationInMs: 0});
        const [message] = await receiver.receiveMessages(1, WAIT);
        result.first = seen(message);
        console.log(JSON.stringify({ready: true}));
        await nextStdinLine();
        // Each step says on stderr where it is, so a hang shows which step waited (the test prints stderr).
        console.error('sessionExpiry: completing after the lock expired');
        try {
            await receiver.completeMessage(message);
            result.complete = 'completed';
        } catch (error) {
            result.complete = error.code || error.name;
        }
        console.error('sessionExpiry: closing the first receiver');
        await receiver.close();
        console.error('sessionExpiry: accepting the session again');
        const again = await client.acceptSession(args.queue, 'a', {maxAutoLockRenewalDurationInMs: 0});
        console.error('sessionExpiry: receiving the redelivery');
        const [redelivered] = await again.receiveMessages(1, WAIT);
        console.error('sessionExpiry: completing the redelivery');
        result.again = seen(redelivered);
        await again.completeMessage(redelivered);
        console.error('sessionExpiry: closing');
        await again.close();
    },
    // a subscription's rules through the rule manager (add-rule, remove-rule, enumerate-rules).
    async rules(client, args, result) {
        const manager = client.createRuleManager(args.topic, args.subscription);
        result.initial = (await listed(manager.listRules())).map((rule) => rule.name);
        await manager.deleteRule('$Default');
        await manager.createRule('red', {sqlExpression: "color = 'red' AND sys.Label = 'order'"});
        await manager.createRule('vip', {correlationId: 'vip', applicationProperties: {tier: 'gold'}}, {
            sqlExpression: "SET user.via = 'vip'",
        });
        try {
            await manager.createRule('red', {sqlExpression: '1=1'});
            result.duplicate = 'accepted';
        } catch (error) {
            result.duplicate = error.code || error.name;
        }
        result.listed = (await listed(manager.listRules())).map((rule) => ({
            name: rule.name,
            sql: rule.filter.sqlExpression === undefined ? null : rule.filter.sqlExpression,
            correlation_id: rule.filter.correlationId === undefined ? null : rule.filter.correlationId,
            action: rule.action.sqlExpression === undefined ? null : rule.action.sqlExpression,
        }));
        const sender = client.createSender(args.topic);
        await sender.sendMessages([
            {body: 'red order', subject: 'order', applicationProperties: {color: 'red'}},
            {body: 'blue order', subject: 'order', applicationProperties: {color: 'blue'}},
            {body: 'gold', correlationId: 'vip', applicationProperties: {tier: 'gold'}},
            {body: 'silver', correlationId: 'vip', applicationProperties: {tier: 'silver'}},
        ]);
        await sender.close();
        const receiver = client.createReceiver(args.topic, args.subscription);
        const messages = await receiver.receiveMessages(10, {maxWaitTimeInMs: 1000});
        result.received = messages.map(seen);
        for (const message of messages) await receiver.completeMessage(message);
        await receiver.close();
    },
};

async function main() {
    const args = JSON.parse(process.argv[2] || '{}');
    const deadline = setTimeout(() => {
        console.log(JSON.stringify({timed_out: true}));
        process.exit(2);
    }, args.timeout_ms || 60000);
    const client = new ServiceBusClient(args.connection_string, {retryOptions: {maxRetries: 0, timeoutInMs: 30000}});
    const result = {error: null};
    try {
        await scenarios[args.scenario](client, args, result);
    } catch (error) {
        result.error = String(error && error.stack || error);
    } finally {
        await client.close();
        clearTimeout(deadline);
    }
    console.log(JSON.stringify(result));
}

main();
