'use strict';
// Receive messages, settle them as told, report what was seen.
//
// argv: {port, address, count (default 1; 0 = stop once attached), timeout_ms (hard deadline, default 10000),
//        idle_ms (stop after this long without a message, once one arrived),
//        outcome: "accept"|"release"|"reject"|"modify"|"none" (default accept),
//        outcomes: [per-delivery outcome, falls back to `outcome`],
//        modify: {delivery_failed, undeliverable_here, message_annotations} (default {delivery_failed: true}),
//        reject_error: {condition, description},
//        selector, browse, dynamic, topic (source capability "topic"), durable (durable=2, expiry never),
//        stream_offset ({string|long|timestamp: value}), stream_filter ([values]), match_unfiltered, undescribed,
//        link_name, container_id, credit (fixed credit, no window), credit_window, drain (drain once attached),
//        desired_capabilities ([symbols] in the attach, Part 2 §2.7.3),
//        end: "close"|"detach" (how the link ends; default close), digest (body sha256 instead of body),
//        hold (print after `count` messages, then keep the connection open until killed; hold_ms safety),
//        user, password, max_frame_size}
// prints: {messages: [...], count, transfer_frames, address, opened, drained, source, errors, timed_out, idle,
//          offered_capabilities and link_properties (of the broker's attach)}

const {rhea, parseArgs, describeMessage, connectOptions, makeFinisher, collectErrors, describeError, plain} =
    require('./common.js');

const a = parseArgs();
const count = a.count === undefined ? 1 : a.count;
const container = rhea.create_container(a.container_id ? {id: a.container_id} : {});
const finisher = makeFinisher();
const errors = [];
const messages = [];
let opened = false;
let drained = false;
let address = null;
let source = null;
let offeredCapabilities = null;
let linkProperties = null;
let conn;
let receiver;
let idleTimer;
let holding = false;

const result = (extra) => () => Object.assign(
    {messages, count: messages.length, transfer_frames: transferFrames, address, opened, drained, source, errors,
        offered_capabilities: offeredCapabilities, link_properties: linkProperties},
    extra || {});

function endAndFinish(extra) {
    if (holding || finisher.finished || finisher.closing) return;
    if (receiver && receiver.is_open()) {
        if (a.end === 'detach') receiver.detach();
        else receiver.close();
    }
    finisher.close(conn, result(extra));
}

collectErrors(container, errors, () => endAndFinish());
container.on('disconnected', (context) => {
    if (holding) process.exit(4);
    if (context.error) errors.push(Object.assign({event: 'disconnected'}, describeError(context.error)));
    finisher.close(null, result());
});

function settle(delivery, index) {
    const outcome = (a.outcomes && a.outcomes[index]) || a.outcome || 'accept';
    switch (outcome) {
    case 'accept': delivery.accept(); break;
    case 'release': delivery.release(); break;
    case 'modify': delivery.modified(a.modify || {delivery_failed: true}); break;
    case 'reject': delivery.reject(a.reject_error || {condition: 'amqp:internal-error', description: 'rejected'}); break;
    case 'none': break;
    default: throw new Error('unknown outcome ' + outcome);
    }
    return outcome;
}

const sourceSpec = {};
if (a.dynamic) sourceSpec.dynamic = true;
else sourceSpec.address = a.address;
const filter = {};
if (a.selector !== undefined) Object.assign(filter, rhea.filter.selector(a.selector));
// RabbitMQ stream filters (as its JavaScript client sends them): {stream_offset: {string|long|timestamp: value}},
// stream_filter: [values], match_unfiltered: bool; `undescribed` sends them as plain values under their names.
function streamFilter(name, value) {
    return a.undescribed ? value : rhea.types.wrap_described(value, name);
}
if (a.stream_offset !== undefined) {
    const spec = a.stream_offset;
    const value = spec.long !== undefined ? rhea.types.wrap_long(spec.long)
        : spec.timestamp !== undefined ? rhea.types.wrap_timestamp(spec.timestamp) : spec.string;
    filter['rabbitmq:stream-offset-spec'] = streamFilter('rabbitmq:stream-offset-spec', value);
}
if (a.stream_filter !== undefined) filter['rabbitmq:stream-filter'] = streamFilter('rabbitmq:stream-filter', a.stream_filter);
if (a.match_unfiltered !== undefined) {
    filter['rabbitmq:stream-match-unfiltered'] = streamFilter('rabbitmq:stream-match-unfiltered', a.match_unfiltered);
}
if (Object.keys(filter).length) sourceSpec.filter = filter;
if (a.browse) sourceSpec.distribution_mode = 'copy';
if (a.topic) sourceSpec.capabilities = ['topic'];
if (a.durable) {
    sourceSpec.durable = 2;
    sourceSpec.expiry_policy = 'never';
}

const fixedCredit = a.credit !== undefined || a.drain;
const receiverOptions = {source: sourceSpec, autoaccept: false};
if (a.link_name) receiverOptions.name = a.link_name;
if (a.desired_capabilities) receiverOptions.desired_capabilities = a.desired_capabilities;
if (fixedCredit) receiverOptions.credit_window = 0;
else if (a.credit_window !== undefined) receiverOptions.credit_window = a.credit_window;

conn = container.connect(connectOptions(a));
receiver = conn.open_receiver(receiverOptions);
// Count transfer frames (a large message arrives split into several).
let transferFrames = 0;
const session = receiver.session;
const onTransfer = session.on_transfer;
session.on_transfer = function (frame) {
    transferFrames++;
    return onTransfer.call(this, frame);
};

receiver.on('receiver_open', (context) => {
    opened = true;
    // rhea stores a null terminus as a typed AMQP null (type.typecode 0x40), not as JS null.
    let remote = context.receiver.source;
    if (remote && remote.type && remote.type.typecode === 0x40) remote = null;
    source = remote ? {address: remote.address === undefined ? null : remote.address,
        distribution_mode: plain(remote.distribution_mode), dynamic: plain(remote.dynamic),
        durable: plain(remote.durable), expiry_policy: plain(remote.expiry_policy)} : null;
    address = remote ? remote.address || null : null;
    offeredCapabilities = plain(context.receiver.offered_capabilities);
    linkProperties = plain(context.receiver.properties);
    if (fixedCredit) {
        if (a.credit) context.receiver.add_credit(a.credit);
        if (a.drain) context.receiver.drain_credit();
    }
    if (count === 0 && !a.drain) endAndFinish();
});

receiver.on('receiver_drained', () => {
    drained = true;
    endAndFinish();
});

receiver.on('message', (context) => {
    const index = messages.length;
    const entry = describeMessage(context.message, a.digest);
    entry.outcome = settle(context.delivery, index);
    messages.push(entry);
    if (a.idle_ms) {
        clearTimeout(idleTimer);
        idleTimer = setTimeout(() => endAndFinish({idle: true}), a.idle_ms);
    }
    if (count > 0 && messages.length >= count && !a.drain) {
        if (a.hold) {
            // Leave every delivery unsettled and the connection open: the test kills this process
            // (a safety deadline still ends it if nobody does).
            holding = true;
            clearTimeout(deadline);
            process.stdout.write(JSON.stringify(result({held: true})()) + '\n');
            setTimeout(() => process.exit(3), a.hold_ms || 30000);
            return;
        }
        endAndFinish();
    }
});

const deadline = setTimeout(() => endAndFinish({timed_out: true}), a.timeout_ms || 10000);
