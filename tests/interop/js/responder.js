'use strict';
// Request/reply service: answers each request on its reply-to address (through an anonymous-relay
// sender), with correlation-id = the request's message-id and the body upper-cased.
//
// argv: {port, address (request queue), count (requests to answer), timeout_ms}
// prints: {handled, reply_outcomes, requests: [...], errors, timed_out}

const {rhea, parseArgs, describeMessage, connectOptions, makeFinisher, collectErrors, describeError} =
    require('./common.js');

const a = parseArgs();
const count = a.count || 1;
const container = rhea.create_container();
const finisher = makeFinisher();
const errors = [];
const requests = [];
const replyOutcomes = [];
let conn;

const result = (extra) => () => Object.assign(
    {handled: requests.length, requests, reply_outcomes: replyOutcomes, errors}, extra || {});

collectErrors(container, errors, () => finisher.close(conn, result()));
container.on('disconnected', (context) => {
    if (context.error) errors.push(Object.assign({event: 'disconnected'}, describeError(context.error)));
    finisher.close(null, result());
});

conn = container.connect(connectOptions(a));
const relay = conn.open_sender({target: {}});
const receiver = conn.open_receiver({source: a.address, autoaccept: false});

function replied(outcome) {
    return (context) => {
        replyOutcomes.push(outcome);
        context.delivery.request.accept();
        if (replyOutcomes.length === count) {
            receiver.close();
            finisher.close(conn, result());
        }
    };
}
relay.on('accepted', replied('accepted'));
relay.on('rejected', replied('rejected'));
relay.on('released', replied('released'));

receiver.on('message', (context) => {
    const request = context.message;
    requests.push(describeMessage(request));
    const body = typeof request.body === 'string' ? request.body.toUpperCase() : request.body;
    const delivery = relay.send({to: request.reply_to, correlation_id: request.message_id, body});
    delivery.request = context.delivery;
});

setTimeout(() => finisher.close(conn, result({timed_out: true})), a.timeout_ms || 10000);
