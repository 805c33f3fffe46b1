'use strict';
// @azure/service-bus against minibroker: send, peek-lock receive, complete.
// Argument: {"connection_string": ..., "queue": ..., "bodies": [...], "timeout_ms": ...}
// Result: {"received": [{"body", "sequence_number", "delivery_count"}], "error": ...}
// No retries; a hard deadline prints {"timed_out": true} and exits.

const {ServiceBusClient} = require('@azure/service-bus');

async function main() {
    const args = JSON.parse(process.argv[2] || '{}');
    const deadline = setTimeout(() => {
        console.log(JSON.stringify({timed_out: true}));
        process.exit(2);
    }, args.timeout_ms || 20000);
    const client = new ServiceBusClient(args.connection_string, {retryOptions: {maxRetries: 0, timeoutInMs: 5000}});
    const result = {received: [], error: null};
    try {
        const sender = client.createSender(args.queue);
        await sender.sendMessages(args.bodies.map((body, i) => ({body, messageId: `m${i}`})));
        await sender.close();
        const receiver = client.createReceiver(args.queue, {receiveMode: 'peekLock'});
        const messages = await receiver.receiveMessages(args.bodies.length, {maxWaitTimeInMs: 5000});
        for (const message of messages) {
            result.received.push({
                body: message.body,
                sequence_number: Number(message.sequenceNumber),
                delivery_count: message.deliveryCount,
            });
            await receiver.completeMessage(message);
        }
        await receiver.close();
    } catch (error) {
        result.error = String(error && error.stack || error);
    } finally {
        await client.close();
        clearTimeout(deadline);
    }
    console.log(JSON.stringify(result));
}

main();
