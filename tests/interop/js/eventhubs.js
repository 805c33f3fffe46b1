'use strict';
// @azure/event-hubs against minibroker: hub properties, send to a partition and by partition key,
// receive a partition from the earliest event.
// Argument: {"connection_string": ..., "bodies": [...], "key": ..., "timeout_ms": ...}
// Result: {"partition_ids": [...], "received": [{"body", "sequence_number", "offset", "partition_key"}],
//          "keyed_partition": id, "error": ...}
// No retries; a hard deadline prints {"timed_out": true} and exits.

const {EventHubProducerClient, EventHubConsumerClient, earliestEventPosition} = require('@azure/event-hubs');

async function main() {
    const args = JSON.parse(process.argv[2] || '{}');
    const deadline = setTimeout(() => {
        console.log(JSON.stringify({timed_out: true}));
        process.exit(2);
    }, args.timeout_ms || 20000);
    const retryOptions = {maxRetries: 0, timeoutInMs: 5000};
    const producer = new EventHubProducerClient(args.connection_string, {retryOptions});
    const consumer = new EventHubConsumerClient('$Default', args.connection_string, {retryOptions});
    const result = {partition_ids: null, received: [], keyed_partition: null, error: null};
    try {
        result.partition_ids = await producer.getPartitionIds();
        const batch = await producer.createBatch({partitionId: '0'});
        for (const body of args.bodies) {
            batch.tryAdd({body});
        }
        await producer.sendBatch(batch);
        await producer.sendBatch([{body: 'keyed'}], {partitionKey: args.key});
        for (const id of result.partition_ids) {
            const props = await producer.getPartitionProperties(id);
            if (id !== '0' && !props.isEmpty) {
                result.keyed_partition = id;
            }
        }
        await new Promise((resolve, reject) => {
            const subscription = consumer.subscribe('0', {
                processEvents: async (events) => {
                    for (const event of events) {
                        result.received.push({
                            body: event.body,
                            sequence_number: event.sequenceNumber,
                            offset: String(event.offset),
                            partition_key: event.partitionKey,
                        });
                    }
                    if (result.received.length >= args.bodies.length) {
                        await subscription.close();
                        resolve();
                    }
                },
                processError: async (error) => {
                    await subscription.close();
                    reject(error);
                },
            }, {startPosition: earliestEventPosition, maxWaitTimeInSeconds: 1});
        });
    } catch (error) {
        result.error = String(error && error.stack || error);
    } finally {
        await producer.close();
        await consumer.close();
        clearTimeout(deadline);
    }
    console.log(JSON.stringify(result));
}

main();
