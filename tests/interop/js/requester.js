'use strict';
// Request/reply client: a dynamic receiver supplies the reply-to address.
//
// argv: {port, address (request queue), requests: [bodies], timeout_ms}
// prints: {reply_to, dynamic_opened, outcomes, replies: [{body, correlation_id, to, ...}], errors, timed_out}

const {rhea, parseArgs, describeMessage, connectOptions, makeFinisher, collectErrors, describeError} =
    require('./common.js');

const a = parseArgs();
const requests = a.requests || ['ping'];
const container = rhea.create_container();
const finisher = makeFinisher();
const errors = [];
const replies = [];
const outcomes = requests.map(() => null);
let replyTo = null;
let sent = 0;
let conn;

const result = (extra) => () => Object.assign({reply_to: replyTo, outcomes, replies, errors}, extra || {});

collectErrors(container, errors, () => finisher.close(conn, result()));
container.on('disconnected', (context) => {
    if (context.error) errors.push(Object.assign({event: 'disconnected'}, describeError(context.error)));
    finisher.close(null, result());
});

conn = container.connect(connectOptions(a));
const replies_receiver = conn.open_receiver({source: {dynamic: true}});

replies_receiver.on('receiver_open', (context) => {
    replyTo = context.receiver.source.address;
    const sender = conn.open_sender(a.address);
    sender.on('sendable', (ctx) => {
        while (sent < requests.length && ctx.sender.sendable()) {
            const delivery = ctx.sender.send({body: requests[sent], reply_to: replyTo, message_id: 'request-' + sent});
            delivery.index = sent;
            sent++;
        }
    });
    sender.on('accepted', (ctx) => { outcomes[ctx.delivery.index] = 'accepted'; });
    sender.on('rejected', (ctx) => { outcomes[ctx.delivery.index] = 'rejected'; });
});

replies_receiver.on('message', (context) => {
    replies.push(describeMessage(context.message));
    if (replies.length === requests.length) {
        replies_receiver.close();
        finisher.close(conn, result());
    }
});

setTimeout(() => finisher.close(conn, result({timed_out: true})), a.timeout_ms || 10000);
