'use strict';
// Helpers shared by the rhea interop scripts.
//
// Every script takes one JSON argument (process.argv[2]), talks to 127.0.0.1
// only, never reconnects, and prints exactly one JSON result line before it
// exits.  A hard deadline (`timeout_ms`) guarantees termination: when it
// fires the script prints what it has so far (with `timed_out: true`).

const crypto = require('crypto');
const rhea = require('rhea');

function parseArgs() {
    return JSON.parse(process.argv[2] || '{}');
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

// A deterministic pseudo-random ASCII string; tests/interop/test_rhea.py has the same formula.
function genBody(size, seed) {
    const buf = Buffer.alloc(size);
    for (let i = 0; i < size; i++) {
        buf[i] = ALPHABET.charCodeAt((i * 31 + seed + (i >> 10)) % ALPHABET.length);
    }
    return buf.toString('latin1');
}

function sha256(value) {
    return crypto.createHash('sha256').update(value).digest('hex');
}

// JSON-friendly view of an AMQP value decoded by rhea.
function plain(value) {
    if (value === undefined || value === null) return null;
    if (Buffer.isBuffer(value)) return {binary: value.toString('base64')};
    if (value instanceof Date) return value.getTime();
    if (typeof value === 'bigint') return Number(value);
    if (Array.isArray(value)) return value.map(plain);
    if (value && value.typecode !== undefined && value.content !== undefined) {
        return {section: value.typecode, content: plain(value.content)};
    }
    if (typeof value === 'object') {
        const out = {};
        for (const key of Object.keys(value)) out[key] = plain(value[key]);
        return out;
    }
    return value;
}

function describeError(error) {
    if (!error) return null;
    return {
        condition: error.condition === undefined ? null : String(error.condition),
        description: error.description === undefined ? (error.message || null) : error.description,
        name: error.name || null,
    };
}

function connectOptions(a) {
    const options = {host: '127.0.0.1', port: a.port, reconnect: false};
    if (a.user !== undefined) options.username = a.user;
    if (a.password !== undefined) options.password = a.password;
    if (a.max_frame_size !== undefined) options.max_frame_size = a.max_frame_size;
    if (a.container_id !== undefined) options.container_id = a.container_id;
    if (a.ca_file !== undefined) {  // amqps: TLS, trusting only this CA
        options.transport = 'tls';
        options.ca = [require('fs').readFileSync(a.ca_file)];
    }
    return options;
}

// Build the rhea message for one entry of a `messages` list.
function buildMessage(spec, index) {
    const m = {};
    if (spec.body_size !== undefined) {
        m.body = genBody(spec.body_size, spec.body_seed || 0);
    } else {
        m.body = spec.body === undefined ? 'message-' + index : spec.body;
    }
    for (const field of ['priority', 'ttl', 'durable', 'message_id', 'to', 'subject', 'reply_to',
        'correlation_id', 'content_type', 'group_id', 'application_properties', 'message_annotations']) {
        if (spec[field] !== undefined) m[field] = spec[field];
    }
    if (spec.properties !== undefined) m.application_properties = spec.properties;
    return m;
}

function describeMessage(m, digest) {
    const out = {};
    if (digest && typeof m.body === 'string') {
        out.body_length = m.body.length;
        out.body_sha256 = sha256(m.body);
    } else {
        out.body = plain(m.body);
    }
    out.has_header = m.priority !== undefined || m.delivery_count !== undefined || m.ttl !== undefined
        || m.durable !== undefined || m.first_acquirer !== undefined;
    // An absent header means delivery-count 0 and priority 4 (Part 3 §3.2.1).
    out.delivery_count = m.delivery_count === undefined ? 0 : m.delivery_count;
    out.priority = m.priority === undefined ? 4 : m.priority;
    out.ttl = plain(m.ttl);
    out.first_acquirer = m.first_acquirer === undefined ? false : m.first_acquirer;
    for (const field of ['message_id', 'correlation_id', 'to', 'subject', 'reply_to', 'application_properties',
        'message_annotations', 'delivery_annotations']) {
        out[field] = plain(m[field]);
    }
    return out;
}

// Prints `result()` once and exits; `close(conn, result)` closes politely first.
function makeFinisher() {
    let finished = false;
    const finisher = {
        get finished() { return finished; },
        print(result, code) {
            if (finished) return;
            finished = true;
            process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(code || 0));
        },
        // Close `conn` (so queued dispositions/detaches reach the broker first), then print.
        close(conn, result) {
            if (finished || finisher.closing) return;
            finisher.closing = true;
            const done = () => finisher.print(typeof result === 'function' ? result() : result);
            if (!conn || conn.is_closed() || !conn.is_open()) {
                // Nothing (more) to say to the broker: give pending writes a moment.
                setTimeout(done, 50);
                return;
            }
            conn.once('connection_close', done);
            conn.once('disconnected', done);
            setTimeout(done, 2000);
            conn.close();
        },
    };
    return finisher;
}

// Error events must have listeners or rhea throws them as 'error' events.
function collectErrors(container, errors, onError) {
    const record = (kind) => (context) => {
        let error;
        if (kind === 'receiver_error') error = context.receiver && context.receiver.error;
        else if (kind === 'sender_error') error = context.sender && context.sender.error;
        else if (kind === 'session_error') error = context.session && context.session.error;
        else error = context && (context.error || (context.connection && context.connection.error));
        const entry = Object.assign({event: kind}, describeError(error));
        errors.push(entry);
        if (onError) onError(entry, context);
    };
    for (const kind of ['receiver_error', 'sender_error', 'session_error', 'connection_error']) {
        container.on(kind, record(kind));
    }
    container.on('protocol_error', (e) => {
        const entry = Object.assign({event: 'protocol_error'}, describeError(e));
        errors.push(entry);
        if (onError) onError(entry);
    });
    container.on('error', (e) => {
        const entry = Object.assign({event: 'error'}, describeError(e));
        errors.push(entry);
        if (onError) onError(entry);
    });
}

module.exports = {rhea, parseArgs, genBody, sha256, plain, describeError, describeMessage, buildMessage,
    connectOptions, makeFinisher, collectErrors};
