'use strict';
// Send messages and report their outcomes.
//
// argv: {port, address (null/absent with anonymous:true: null target, route by `to`),
//        messages: [{body | body_size+body_seed, priority, ttl, durable, message_id, to, subject, reply_to,
//                    correlation_id, properties (application-properties), message_annotations}],
//        count + body_prefix (extra generated messages "<prefix><i>"), user, password, container_id,
//        max_frame_size, capabilities (target capabilities), timeout_ms}
// prints: {sent, outcomes: ["accepted"|"rejected"|"released"|"modified"|null ...],
//          rejections: {index: {condition, description}}, errors: [...], opened, timed_out}

const {rhea, parseArgs, buildMessage, connectOptions, makeFinisher, collectErrors, describeError} = require('./common.js');

const a = parseArgs();
const specs = (a.messages || []).slice();
for (let i = 0; i < (a.count || 0); i++) specs.push({body: (a.body_prefix || 'msg-') + i});

const container = rhea.create_container(a.container_id ? {id: a.container_id} : {});
const finisher = makeFinisher();
const errors = [];
const outcomes = specs.map(() => null);
const rejections = {};
let sent = 0;
let settled = 0;
let opened = false;
let conn;

const result = (extra) => () => Object.assign({sent, settled, outcomes, rejections, errors, opened}, extra || {});

collectErrors(container, errors, () => finisher.close(conn, result()));
container.on('disconnected', (context) => {
    if (context.error) errors.push(Object.assign({event: 'disconnected'}, describeError(context.error)));
    finisher.close(null, result());
});

function maybeDone() {
    if (settled === specs.length) finisher.close(conn, result());
}

container.on('connection_open', () => { opened = true; });

function record(name) {
    return (context) => {
        const index = context.delivery.index;
        if (index === undefined || outcomes[index] !== null) return;
        outcomes[index] = name;
        if (name === 'rejected') {
            const state = context.delivery.remote_state;
            rejections[index] = describeError(state && state.error);
        }
        settled++;
        maybeDone();
    };
}
for (const name of ['accepted', 'rejected', 'released', 'modified']) container.on(name, record(name));

container.on('sendable', (context) => {
    const sender = context.sender;
    while (sent < specs.length && sender.sendable()) {
        const delivery = sender.send(buildMessage(specs[sent], sent));
        delivery.index = sent;
        sent++;
    }
});

conn = container.connect(connectOptions(a));
const target = {address: a.anonymous ? undefined : a.address};
if (a.capabilities) target.capabilities = a.capabilities;
const sender = conn.open_sender({target, treat_modified_as_released: false});
sender.on('sender_open', () => { if (specs.length === 0) finisher.close(conn, result()); });

setTimeout(() => finisher.close(conn, result({timed_out: true})), a.timeout_ms || 15000);
