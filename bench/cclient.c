/*
 * A benchmark client in C: one AMQP 1.0 sender or receiver on Qpid Proton's C proactor API,
 * so that the client is not what limits the numbers (bench/cclient_bench.py builds and runs it).
 *
 *   cclient send    HOST PORT ADDRESS COUNT SIZE   LIMIT_MS
 *   cclient receive HOST PORT ADDRESS COUNT CREDIT LIMIT_MS
 *
 * send: COUNT messages whose body is SIZE bytes of binary data (AMQP 1.0 Part 3 section 3.2.6:
 * one data section), encoded once and sent unsettled as fast as the peer's credit allows; done
 * when every delivery has a terminal outcome from the peer.
 * receive: a window of CREDIT (topped up when half is used, never past COUNT), each message
 * accepted and settled (section 3.4.2) without being decoded; done after COUNT messages.
 * Pre-settled deliveries (Qpid's broker.c sends those) are settled without an outcome.
 *
 * The clock starts when the peer attaches the link and stops at the last outcome or message;
 * LIMIT_MS after the start of the process the job stops wherever it is ("complete": false).
 * Prints one JSON object on stdout: op, count (outcomes or messages), sent, not_accepted (outcomes other than accepted), bytes,
 * start and end (CLOCK_MONOTONIC seconds, the clock of Python's time.monotonic on Linux),
 * elapsed_s, complete, client_cpu_s, error. Exit status 1 when the connection failed.
 */

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct {
  bool sending;
  const char *address;
  long count;
  long window;          /* receiver: credit window */
  pn_proactor_t *proactor;
  pn_connection_t *connection;
  char *payload;        /* sender: the encoded message, sent COUNT times */
  size_t payload_size;
  long sent, outcomes, not_accepted, received;
  long long bytes;
  double start, end;
  bool done, timed_out;
  char error[512];
} job_t;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void finish(job_t *job) {
  if (job->done) return;
  job->done = true;
  job->end = now();
  pn_proactor_cancel_timeout(job->proactor); /* else the proactor stays active until the limit */
  pn_connection_close(job->connection);
}

/* The first error condition seen is the one reported. */
static void check(job_t *job, pn_event_t *event, pn_condition_t *cond) {
  if (pn_condition_is_set(cond) && !job->error[0]) {
    snprintf(job->error, sizeof(job->error), "%s: %s: %s", pn_event_type_name(pn_event_type(event)),
             pn_condition_get_name(cond), pn_condition_get_description(cond));
  }
}

/* One message with a data section of `size` bytes, encoded once. */
static int encode_payload(job_t *job, size_t size) {
  char *body = malloc(size ? size : 1);
  size_t i, capacity = size + 256;
  pn_message_t *message = pn_message();
  int err;
  for (i = 0; i < size; ++i) body[i] = (char)(i * 131 + 7); /* not all zero: no help from compression anywhere */
  pn_data_put_binary(pn_message_body(message), pn_bytes(size, body));
  pn_message_set_inferred(message, true); /* a binary body travels as a data section, not an amqp-value */
  job->payload = malloc(capacity);
  job->payload_size = capacity;
  err = pn_message_encode(message, job->payload, &job->payload_size);
  pn_message_free(message);
  free(body);
  return err;
}

static void pump(job_t *job, pn_link_t *sender) {
  while (pn_link_credit(sender) > 0 && job->sent < job->count) {
    uint64_t tag = (uint64_t)job->sent;
    pn_delivery(sender, pn_dtag((const char *)&tag, sizeof(tag)));
    pn_link_send(sender, job->payload, job->payload_size);
    pn_link_advance(sender);
    ++job->sent;
  }
}

static void top_up(job_t *job, pn_link_t *receiver) {
  long credit = pn_link_credit(receiver);
  long want = job->count - job->received; /* never ask for more than the job still needs */
  if (want > job->window) want = job->window;
  if (credit < job->window / 2 && want > credit) pn_link_flow(receiver, (int)(want - credit));
}

static void on_delivery(job_t *job, pn_delivery_t *d) {
  pn_link_t *link = pn_delivery_link(d);
  if (pn_link_is_sender(link)) {
    uint64_t state = pn_delivery_remote_state(d);
    if (!pn_delivery_updated(d) || (state == 0 && !pn_delivery_settled(d))) return;
    if (state != PN_ACCEPTED) ++job->not_accepted;
    pn_delivery_settle(d);
    if (++job->outcomes == job->count) finish(job);
    return;
  }
  if (!pn_delivery_readable(d) || pn_delivery_partial(d)) return; /* the rest of it comes in a later frame */
  {
    char buf[4096];
    ssize_t n;
    while ((n = pn_link_recv(link, buf, sizeof(buf))) > 0) job->bytes += n;
  }
  pn_link_advance(link);
  if (!pn_delivery_settled(d)) pn_delivery_update(d, PN_ACCEPTED);
  pn_delivery_settle(d);
  ++job->received;
  if (job->received == job->count) {
    finish(job);
  } else {
    top_up(job, link);
  }
}

static void handle(job_t *job, pn_event_t *event) {
  switch (pn_event_type(event)) {
  case PN_CONNECTION_INIT: {
    pn_connection_t *c = pn_event_connection(event);
    pn_session_t *s = pn_session(c);
    pn_link_t *l;
    pn_connection_set_container(c, job->sending ? "bench-cclient-send" : "bench-cclient-receive");
    pn_connection_open(c);
    pn_session_open(s);
    if (job->sending) {
      l = pn_sender(s, "bench-sender");
      pn_terminus_set_address(pn_link_target(l), job->address);
    } else {
      l = pn_receiver(s, "bench-receiver");
      pn_terminus_set_address(pn_link_source(l), job->address);
    }
    pn_link_open(l);
    if (!job->sending) top_up(job, l);
    break;
  }
  case PN_LINK_REMOTE_OPEN:
    if (job->start == 0) job->start = now();
    break;
  case PN_LINK_FLOW:
    if (job->sending && !job->done) pump(job, pn_event_link(event));
    break;
  case PN_DELIVERY:
    if (!job->done) on_delivery(job, pn_event_delivery(event));
    break;
  case PN_PROACTOR_TIMEOUT:
    /* Not the connection's event batch: the connection may only be touched from its own, so wake it. */
    if (!job->done) {
      job->timed_out = true;
      pn_connection_wake(job->connection);
    }
    break;
  case PN_CONNECTION_WAKE:
    if (job->timed_out) finish(job);
    break;
  case PN_LINK_REMOTE_CLOSE:
    check(job, event, pn_link_remote_condition(pn_event_link(event)));
    finish(job);
    break;
  case PN_SESSION_REMOTE_CLOSE:
    check(job, event, pn_session_remote_condition(pn_event_session(event)));
    finish(job);
    break;
  case PN_CONNECTION_REMOTE_CLOSE:
    check(job, event, pn_connection_remote_condition(pn_event_connection(event)));
    finish(job);
    break;
  case PN_TRANSPORT_CLOSED:
    /* An error only if the job was not over: closing at the end is the normal way out. */
    if (!job->done) check(job, event, pn_transport_condition(pn_event_transport(event)));
    if (!job->done && !job->error[0]) snprintf(job->error, sizeof(job->error), "the connection closed early");
    finish(job);
    break;
  default:
    break;
  }
}

static void print_json_string(const char *text) {
  putchar('"');
  for (; *text; ++text) {
    unsigned char ch = (unsigned char)*text;
    if (ch == '"' || ch == '\\') {
      printf("\\%c", ch);
    } else if (ch < 0x20) {
      printf("\\u%04x", ch);
    } else {
      putchar(ch);
    }
  }
  putchar('"');
}

int main(int argc, char **argv) {
  job_t job;
  char addr[PN_MAX_ADDR];
  long limit_ms;
  bool running = true;
  if (argc != 8 || (strcmp(argv[1], "send") != 0 && strcmp(argv[1], "receive") != 0)) {
    fprintf(stderr, "usage: %s send HOST PORT ADDRESS COUNT SIZE LIMIT_MS\n"
                    "       %s receive HOST PORT ADDRESS COUNT CREDIT LIMIT_MS\n", argv[0], argv[0]);
    return 2;
  }
  memset(&job, 0, sizeof(job));
  job.sending = strcmp(argv[1], "send") == 0;
  job.address = argv[4];
  job.count = atol(argv[5]);
  job.window = atol(argv[6]);
  limit_ms = atol(argv[7]);
  if (job.count <= 0 || job.window <= 0 || limit_ms <= 0) {
    fprintf(stderr, "COUNT, SIZE or CREDIT and LIMIT_MS must be positive\n");
    return 2;
  }
  if (job.sending && encode_payload(&job, (size_t)job.window) != 0) {
    fprintf(stderr, "could not encode a %ld-byte message\n", job.window);
    return 2;
  }
  job.proactor = pn_proactor();
  job.connection = pn_connection();
  pn_proactor_set_timeout(job.proactor, (pn_millis_t)limit_ms);
  pn_proactor_addr(addr, sizeof(addr), argv[2], argv[3]);
  pn_proactor_connect2(job.proactor, job.connection, NULL, addr);
  while (running) {
    pn_event_batch_t *batch = pn_proactor_wait(job.proactor);
    pn_event_t *event;
    while ((event = pn_event_batch_next(batch)) != NULL) {
      if (pn_event_type(event) == PN_PROACTOR_INACTIVE) running = false;
      handle(&job, event);
    }
    pn_proactor_done(job.proactor, batch);
  }
  if (job.start == 0) job.start = job.end;
  printf("{\"op\": \"%s\", \"count\": %ld, \"sent\": %ld, \"not_accepted\": %ld, \"bytes\": %lld, "
         "\"start\": %.6f, \"end\": %.6f, \"elapsed_s\": %.6f, \"complete\": %s, \"client_cpu_s\": %.6f, \"error\": ",
         argv[1], job.sending ? job.outcomes : job.received, job.sent, job.not_accepted, job.bytes, job.start, job.end,
         job.end - job.start, (!job.timed_out && !job.error[0]) ? "true" : "false", cpu_seconds());
  if (job.error[0]) {
    print_json_string(job.error);
  } else {
    printf("null");
  }
  printf("}\n");
  pn_proactor_free(job.proactor);
  free(job.payload);
  return job.error[0] ? 1 : 0;
}
