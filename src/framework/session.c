/*
 * session.c - the top of the framework: the session supervisor and the client's life cycle.
 *
 * The supervisor thread follows libzookeeper's session events (connected, disconnected,
 * expired) and turns them into the public connection states; it vouches for the connection
 * while the process keeps running (stall detection), confirms held locks through the leader
 * with syncs, replaces a handle whose session ended, closes old handles (zookeeper_close must
 * not run on libzookeeper's own threads) and runs the timers.  zkit_client_new() starts it and
 * zkit_client_close() ends it, after the close listeners have been told.  Every file below
 * this one is called from here; none calls back up.
 */

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include "framework/client.h"
#include "framework/errors.h"
#include "framework/ops.h"
#include "framework/paths.h"

/* How long closing waits for the replies of requests already sent. */
#define CLOSE_DRAIN_MS 2000

/* Closes a detached handle: waits for the calls borrowing it, then zookeeper_close() without
 * c->mu (its pending completions run inside it and take c->mu). */
static void close_handle(zkit_client_t *c, zhandle_t *zh, uint64_t generation)
{
    zkit__handle_close(c, zh);
    zkit__ops_abandon(c, generation);
    pthread_mutex_lock(&c->mu);
    zkit__watches_drop_generation(c, generation);
}

/* Replaces the handle with one for a new session after the old one is lost. */
static void replace_handle(zkit_client_t *c)
{
    zhandle_t *old = c->handle.zh;
    uint64_t old_generation = c->handle.generation;
    c->handle.zh = NULL;
    c->handle.connected = 0;
    if (old)
        close_handle(c, old, old_generation);
    if (c->closing)
        return;
    if (zkit__handle_open(c) != 0)
        zkit__log(&c->log, ZKIT_LOG_ERROR, "cannot open a new session; will retry");
}

/*
 * Vouching for a connection.  libzookeeper says CONNECTED until its IO thread sees two thirds
 * of the session timeout go by without a byte from the server, and the validity deadline of a
 * held lock counts from the moment it says otherwise.  That holds only while its threads run:
 * a process stopped (SIGSTOP, a frozen VM, swapping) past the session timeout resumes with
 * libzookeeper still saying CONNECTED, and later counting the disconnect from the resumption,
 * while the server expired the session and let a rival take the lock long before.  So the
 * supervisor, which wakes every vouch_interval() while connected, vouches for the connection
 * each time; a wake later than zkit__client_hold_allowance_ms() after the last one means this
 * process (or the supervisor) was held up, and then nothing newer than the last vouch is
 * trusted until the server answers a probe sent after the gap.
 *
 * CLOCK_MONOTONIC, which every deadline here is kept on (and zkit_lock_valid_until()
 * promises), stands still while the machine is suspended, whereas the servers' clocks do
 * not: a gap is measured on CLOCK_BOOTTIME too, which goes on counting, and the time the
 * machine slept since the last vouch counts as time gone by on the monotonic clock as well.
 */

/* CLOCK_BOOTTIME minus CLOCK_MONOTONIC: how long the machine has slept since it booted (plus
 * the sleep a test pretends).  0 where CLOCK_BOOTTIME is missing. */
static int64_t slept_ms(const zkit_client_t *c)
{
    struct timespec boot;
    if (clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return c->faults.slept_ms;
    return (int64_t)boot.tv_sec * 1000 + boot.tv_nsec / 1000000 - zkit__monotonic_ms() +
           c->faults.slept_ms;
}

/* Vouches for the connection at `now` (c->mu held). */
static void vouch_at(zkit_client_t *c, int64_t now)
{
    c->confirm.vouched_ms = now;
    c->confirm.vouched_slept_ms = slept_ms(c);
}

/* The last vouch on the monotonic clock, moved back by the time the machine slept since. */
static int64_t vouched_at(const zkit_client_t *c)
{
    int64_t slept = slept_ms(c) - c->confirm.vouched_slept_ms;
    return c->confirm.vouched_ms - (slept > 0 ? slept : 0);
}

static int64_t vouch_interval(const zkit_client_t *c)
{
    int64_t interval = zkit__client_hold_allowance_ms(c) / 2;
    return interval < 1000 ? interval : 1000;
}

static int vouch_stale(const zkit_client_t *c, int64_t now)
{
    return c->confirm.stalled || now - vouched_at(c) > zkit__client_hold_allowance_ms(c);
}

/* libzookeeper's completion thread: a reply to a probe proves the server had our session
 * alive when it got the probe, which was after the probe was sent. */
static void probe_done(int rc, const struct Stat *stat, const void *data)
{
    zkit_client_t *c = (zkit_client_t *)data;
    (void)stat;
    pthread_mutex_lock(&c->mu);
    c->confirm.probe_pending = 0;
    if ((rc == ZOK || rc == ZNONODE) && c->confirm.probe_generation == c->handle.generation &&
        c->handle.connected && c->confirm.stalled &&
        c->confirm.probe_sent_ms >= c->confirm.vouched_ms) {
        c->confirm.vouched_ms = c->confirm.probe_sent_ms;
        c->confirm.vouched_slept_ms = c->confirm.probe_slept_ms;
        c->confirm.stalled = 0;
    }
    pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
}

/* Supervisor, c->mu held: vouch for the connection now, or probe it after a gap. */
static void vouch(zkit_client_t *c, int64_t now)
{
    zhandle_t *zh = c->handle.zh;
    if (!c->handle.connected || c->closing || !zh)
        return;
    if (!vouch_stale(c, now)) {
        vouch_at(c, now);
        return;
    }
    if (!c->confirm.stalled) {
        /* The sleep, if any, becomes part of the gap for good. */
        c->confirm.vouched_ms = vouched_at(c);
        c->confirm.vouched_slept_ms = slept_ms(c);
        zkit__log(&c->log, ZKIT_LOG_INFO, "this process was held up for %lld ms with the "
                  "session's timeout at %d ms; held locks count as disconnected until the "
                  "server answers", (long long)(now - c->confirm.vouched_ms),
                  c->handle.negotiated_timeout_ms);
    }
    c->confirm.stalled = 1;
    if (c->confirm.probe_pending || c->faults.hold_probes)
        return;
    /* Only the supervisor replaces or closes the handle, so it stays valid without c->mu,
     * which the completion takes. */
    c->confirm.probe_pending = 1;
    c->confirm.probe_generation = c->handle.generation;
    c->confirm.probe_sent_ms = now;
    c->confirm.probe_slept_ms = slept_ms(c);
    pthread_mutex_unlock(&c->mu);
    if (zoo_aexists(zh, "/", 0, probe_done, c) != ZOK) {
        pthread_mutex_lock(&c->mu);
        c->confirm.probe_pending = 0;
        return;
    }
    pthread_mutex_lock(&c->mu);
}

/*
 * Confirmation through the leader.  A follower cut off from the leader keeps answering our
 * pings until its own read timeout on the leader link (syncLimit x tickTime), while the
 * leader, hearing nothing of our session, may expire it and let a rival take our locks.  So
 * a held lock's validity rests on requests the leader answered.  A sync sent at q and
 * answered proves the leader handled it at some l >= q; the follower's last report of our
 * session's touches before l came at p >= l - tickTime/2 (minus network delay), and carried
 * a touch of ours no older than G before p, G being the largest gap between our requests
 * around then.  So the leader expires the session no sooner than q - tickTime/2 - G + T,
 * which is q + 3T/4 - G with tickTime <= T/2.  lockstate.c gives a disconnect noticed at s
 * until s + T/3 - margin, so the confirmation counts as that disconnect at q + 5T/12 - G.
 *
 * While a lock is held the supervisor sends a sync every T/8, so G is T/8 and each answer
 * is good until q + 7T/24.  Until the syncs alone cover the window (just after a grant, or
 * after a reconnect) G is the T/3 between libzookeeper's pings, each answer is good until
 * q + T/12, and the syncs go every T/24.  A confirmation that lapses while connected counts
 * as a disconnect from then: the state goes SUSPENDED (held locks UNCERTAIN, then EXPIRED at
 * their deadline), and RECONNECTED once a later sync is answered in the same session.
 */
typedef struct confirm_sync {
    zkit_client_t *client;
    uint64_t generation;
    int64_t sent_ms;
    int64_t gap_ms;             /* G for this sync */
    zkit__confirm_fn done;
    void *arg;
} confirm_sync_t;

/* G for a sync sent at q (c->mu held): the widest gap between the confirming syncs that
 * cover [q - T/4 - G, q], or T/3 when they do not reach back that far. */
static int64_t confirm_gap(const zkit_client_t *c, int64_t q)
{
    int64_t t = c->handle.negotiated_timeout_ms, prev = q, widest = 0;
    for (unsigned k = 0; k < c->confirm.confirm_touch_count; k++) {
        unsigned slot = (c->confirm.confirm_touch_next + ZKIT__CONFIRM_TOUCHES - 1 - k) %
                        ZKIT__CONFIRM_TOUCHES;
        int64_t at = c->confirm.confirm_touches[slot];
        if (prev - at > widest)
            widest = prev - at;
        prev = at;
        if (q - at >= t / 4 + widest)
            return widest < t / 3 ? widest : t / 3;
    }
    return t / 3;
}

static void confirm_touch(zkit_client_t *c, int64_t at)
{
    c->confirm.confirm_touches[c->confirm.confirm_touch_next] = at;
    c->confirm.confirm_touch_next = (c->confirm.confirm_touch_next + 1) % ZKIT__CONFIRM_TOUCHES;
    if (c->confirm.confirm_touch_count < ZKIT__CONFIRM_TOUCHES)
        c->confirm.confirm_touch_count++;
}

/* Touches on another connection may have gone to a server the leader no longer hears. */
static void confirm_touches_forget(zkit_client_t *c)
{
    c->confirm.confirm_touch_count = 0;
}

/* Whether the client confirms its session now (c->mu held). */
static int confirm_active(const zkit_client_t *c)
{
    return c->handle.connected && !c->closing && c->handle.zh &&
           c->handle.negotiated_timeout_ms > 0 &&
           (c->confirm.held_locks > 0 || c->confirm.unconfirmed);
}

/* When the next confirming sync is due: T/8 after the last, sooner while an answer is good
 * for less than twice that, but never more often than every T/24. */
static int64_t confirm_due(const zkit_client_t *c)
{
    int64_t t = c->handle.negotiated_timeout_ms, last = c->confirm.confirm_last_sent_ms;
    int64_t step = (c->confirm.confirmed_until_ms - last) / 2, fastest = t / 24 > 10 ? t / 24 : 10;
    if (last == 0)
        return 0;
    if (step > t / 8)
        step = t / 8;
    return last + (step > fastest ? step : fastest);
}

/* libzookeeper's completion thread. */
static void confirm_sync_done(int rc, const char *value, const void *data)
{
    confirm_sync_t *s = (confirm_sync_t *)data;
    zkit_client_t *c = s->client;
    (void)value;
    pthread_mutex_lock(&c->mu);
    if (--c->confirm.confirm_in_flight == 0)
        pthread_cond_broadcast(&c->cond); /* drain_requests */
    if (rc == ZOK && s->generation == c->handle.generation) {
        int64_t until = s->sent_ms + (int64_t)c->handle.negotiated_timeout_ms * 5 / 12 - s->gap_ms;
        if (until > c->confirm.confirmed_until_ms) {
            c->confirm.confirmed_until_ms = until;
            c->confirm.confirmed_sent_ms = s->sent_ms;
        }
        pthread_cond_signal(&c->supervisor_cond);
    }
    pthread_mutex_unlock(&c->mu);
    if (s->done)
        s->done(rc == ZOK ? 0 : zkit__error_from_zk(rc), s->arg);
    free(s);
}

/* Sends a confirming sync on `zh`, which the caller keeps open (c->mu held; released around
 * the send). */
static int confirm_send_locked(zkit_client_t *c, zhandle_t *zh, uint64_t generation,
                               zkit__confirm_fn done, void *arg)
{
    confirm_sync_t *s = malloc(sizeof(*s));
    int64_t now = zkit__monotonic_ms();
    int rc;
    if (!s)
        return ZKIT_ENOMEM;
    s->client = c;
    s->generation = generation;
    s->sent_ms = now;
    s->gap_ms = confirm_gap(c, now);
    s->done = done;
    s->arg = arg;
    c->confirm.confirm_last_sent_ms = now;
    c->confirm.confirm_in_flight++;
    pthread_mutex_unlock(&c->mu);
    rc = zoo_async(zh, "/", confirm_sync_done, s);
    pthread_mutex_lock(&c->mu);
    if (rc != ZOK) {
        if (--c->confirm.confirm_in_flight == 0)
            pthread_cond_broadcast(&c->cond);
        free(s);
        return zkit__error_from_zk(rc);
    }
    /* Only once it is sent: a touch that never went would shrink the gaps. */
    if (generation == c->handle.generation)
        confirm_touch(c, now);
    c->faults.confirm_syncs++;
    if (done)
        c->faults.grant_syncs++;
    return 0;
}

/* Supervisor, c->mu held: the confirmation's state changes, and the next sync. */
static void confirm(zkit_client_t *c, int64_t now)
{
    if (!confirm_active(c))
        return;
    if (c->confirm.unconfirmed && now < c->confirm.confirmed_until_ms) {
        zkit__log(&c->log, ZKIT_LOG_INFO, "the leader answered again: held locks are "
                  "confirmed");
        c->confirm.unconfirmed = 0;
        c->suspended_since_ms = 0;
        zkit__client_change_state(c, c->confirm.unconfirmed_read_only ? ZKIT_CONN_READ_ONLY
                                                                      : ZKIT_CONN_RECONNECTED);
    } else if (!c->confirm.unconfirmed && c->confirm.held_locks > 0 &&
               now >= c->confirm.confirmed_until_ms && c->state != ZKIT_CONN_SUSPENDED &&
               c->state != ZKIT_CONN_LOST) {
        int64_t since = c->confirm.confirmed_until_ms;
        if (vouch_stale(c, now) && vouched_at(c) < since)
            since = vouched_at(c);
        zkit__log(&c->log, ZKIT_LOG_WARN, "no answer through the leader for %lld ms with the "
                  "session's timeout at %d ms; held locks count as disconnected",
                  (long long)(now - c->confirm.confirmed_sent_ms),
                  c->handle.negotiated_timeout_ms);
        c->confirm.unconfirmed = 1;
        c->confirm.unconfirmed_read_only = c->state == ZKIT_CONN_READ_ONLY;
        c->suspended_since_ms = since;
        zkit__client_change_state(c, ZKIT_CONN_SUSPENDED);
    }
    if (now >= confirm_due(c))
        confirm_send_locked(c, c->handle.zh, c->handle.generation, NULL, NULL);
}

/* The first holding wakes the supervisor only when its first sync is due before the
 * supervisor's own wake-up (after an idle period): in a loop of short holdings that would
 * cost two thread switches per cycle. */
void zkit__client_hold(zkit_client_t *c, int delta)
{
    pthread_mutex_lock(&c->mu);
    c->confirm.held_locks += delta;
    if (delta > 0 && c->confirm.held_locks == delta && c->supervisor_sleeps_until_ms &&
        confirm_due(c) < c->supervisor_sleeps_until_ms)
        pthread_cond_signal(&c->supervisor_cond);
    pthread_mutex_unlock(&c->mu);
}

/* With room for the first sync of the holding to come back (T/24) before it lapses. */
int zkit__client_confirmed(zkit_client_t *c)
{
    int confirmed;
    pthread_mutex_lock(&c->mu);
    confirmed = zkit__monotonic_ms() + c->handle.negotiated_timeout_ms / 24 <
                c->confirm.confirmed_until_ms;
    pthread_mutex_unlock(&c->mu);
    return confirmed;
}

void zkit__client_confirm_write(zkit_client_t *c, int64_t sent_ms)
{
    pthread_mutex_lock(&c->mu);
    /* G is the T/3 between libzookeeper's pings: the syncs may not have run yet. */
    if (c->handle.negotiated_timeout_ms > 0) {
        int64_t until = sent_ms + c->handle.negotiated_timeout_ms / 12;
        if (until > c->confirm.confirmed_until_ms) {
            c->confirm.confirmed_until_ms = until;
            c->confirm.confirmed_sent_ms = sent_ms;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

int zkit__client_confirm(zkit_client_t *c, zkit__confirm_fn done, void *arg)
{
    uint64_t generation;
    zhandle_t *zh = zkit__conn_get(c, &generation);
    int rc;
    if (!zh)
        return zkit__client_is_closing(c) ? ZKIT_ECLOSED : ZKIT_ECONNLOSS;
    pthread_mutex_lock(&c->mu);
    rc = confirm_send_locked(c, zh, generation, done, arg);
    pthread_mutex_unlock(&c->mu);
    zkit__conn_put(c);
    return rc;
}

static void on_connected(zkit_client_t *c, int read_only, int64_t at_ms)
{
    const clientid_t *id = zoo_client_id(c->handle.zh);
    int same_session;
    ZKIT__COUNT(c->counters.connects);
    if (c->ever_connected)
        ZKIT__COUNT(c->counters.reconnects);
    c->handle.connected = 1;
    zkit__watches_connected(c, c->handle.zh, c->handle.generation);
    vouch_at(c, at_ms);
    c->confirm.stalled = 0;
    /* A handle whose first server was read-only has no session the quorum knows: at its first
     * read-write server libzookeeper trades it for a new one without an expiry event.  The old
     * session is over all the same, and listeners learn that from LOST. */
    if (c->ever_connected && c->handle.session_id != 0 && id->client_id != c->handle.session_id &&
        c->state != ZKIT_CONN_LOST) {
        zkit__log(&c->log, ZKIT_LOG_WARN, "session 0x%llx replaced by 0x%llx (it began on a "
                  "read-only server)", (unsigned long long)c->handle.session_id,
                  (unsigned long long)id->client_id);
        if (c->state != ZKIT_CONN_SUSPENDED)
            zkit__client_change_state(c, ZKIT_CONN_SUSPENDED);
        zkit__client_change_state(c, ZKIT_CONN_LOST);
    }
    same_session = c->handle.session_id != 0 && id->client_id == c->handle.session_id;
    if (!same_session && ZKIT__COUNT(c->counters.sessions) > 1)
        ZKIT__COUNT(c->counters.session_changes);
    c->handle.session_id = id->client_id;
    memcpy(c->handle.session_passwd, id->passwd, sizeof(c->handle.session_passwd));
    __atomic_store_n(&c->handle.negotiated_timeout_ms, zoo_recv_timeout(c->handle.zh),
                     __ATOMIC_RELAXED);
    confirm_touches_forget(c);
    if (!same_session) {
        /* A new session holds no lock yet: each grant confirms itself. */
        c->confirm.unconfirmed = 0;
        c->confirm.confirmed_until_ms = at_ms + c->handle.negotiated_timeout_ms / 12;
        c->confirm.confirmed_sent_ms = at_ms;
    } else if (c->confirm.unconfirmed ||
               (c->confirm.held_locks > 0 && at_ms >= c->confirm.confirmed_until_ms)) {
        /* Held locks stay UNCERTAIN until the leader answers a sync on this connection. */
        c->confirm.unconfirmed = 1;
        c->confirm.unconfirmed_read_only = read_only;
        if (c->state != ZKIT_CONN_SUSPENDED) {
            c->suspended_since_ms = c->confirm.confirmed_until_ms < at_ms
                                        ? c->confirm.confirmed_until_ms : at_ms;
            zkit__client_change_state(c, ZKIT_CONN_SUSPENDED);
        }
        return;
    }
    c->suspended_since_ms = 0;
    if (!c->ever_connected) {
        c->ever_connected = 1;
        zkit__client_change_state(c, read_only ? ZKIT_CONN_READ_ONLY : ZKIT_CONN_CONNECTED);
    } else if (read_only) {
        zkit__client_change_state(c, ZKIT_CONN_READ_ONLY);
    } else if (c->state != ZKIT_CONN_CONNECTED && c->state != ZKIT_CONN_RECONNECTED) {
        zkit__client_change_state(c, ZKIT_CONN_RECONNECTED);
    }
}

static void on_disconnected(zkit_client_t *c, int64_t at_ms)
{
    if (c->state == ZKIT_CONN_CONNECTED || c->state == ZKIT_CONN_RECONNECTED ||
        c->state == ZKIT_CONN_READ_ONLY) {
        /* Noticed late if this process was held up: count from the last moment it was
         * watching the connection. */
        int64_t since = c->handle.connected && vouch_stale(c, at_ms) ? vouched_at(c) : at_ms;
        /* Or from a held lock's confirmation, if it lapsed first (the supervisor, held up
         * less than it tolerates, may not have said so yet). */
        if (c->confirm.held_locks > 0 && c->confirm.confirmed_until_ms < since)
            since = c->confirm.confirmed_until_ms;
        c->suspended_since_ms = since;
        zkit__client_change_state(c, ZKIT_CONN_SUSPENDED);
    }
    c->handle.connected = 0;
    confirm_touches_forget(c);
}

static void on_session_lost(zkit_client_t *c, const char *why)
{
    zkit__log(&c->log, ZKIT_LOG_WARN, "session 0x%llx lost (%s); starting a new one",
              (unsigned long long)c->handle.session_id, why);
    if (c->state != ZKIT_CONN_SUSPENDED && c->state != ZKIT_CONN_LOST && c->ever_connected)
        zkit__client_change_state(c, ZKIT_CONN_SUSPENDED);
    c->suspended_since_ms = 0;
    if (c->ever_connected)
        zkit__client_change_state(c, ZKIT_CONN_LOST);
    c->confirm.unconfirmed = 0;
    replace_handle(c);
}

/*
 * No server has answered for the session timeout: the session is given up here and a new one
 * started.  The server may keep the old one for a while yet (zkit__client_given_up_t), and
 * with it the old session's ephemeral nodes, which hold up every rival of a lock it had and
 * every node of ours made again under the same name: a handle on it ends it as soon as a
 * server answers.  Its locks were told LOST before (their validity ended long before the
 * timeout), so ending it early frees nothing a holder here still counts on.
 */
static void give_up_session(zkit_client_t *c)
{
    int64_t id = c->handle.session_id;
    char passwd[16];
    memcpy(passwd, c->handle.session_passwd, sizeof(passwd));
    on_session_lost(c, "suspended for longer than the session timeout");
    if (id == 0 || c->closing)
        return;
    zkit__given_up_close(c); /* an older one still unanswered: its expiry will do */
    (void)zkit__given_up_open(c, id, passwd);
}

/* The given-up session's handle is closed once a server answered for it, or unanswered a
 * session timeout after the client is connected again (the servers reachable, it would have
 * been answered by then).  When the client connects again and it has no answer yet, it is
 * opened afresh: it may be waiting out libzookeeper's pause between attempts, or a handshake
 * sent to a server still starting, while a new handle asks at once. */
static void end_given_up(zkit_client_t *c, int64_t now)
{
    if (!c->given_up.zh)
        return;
    if (!c->given_up.due_ms && c->handle.connected) {
        (void)zkit__given_up_reopen(c);
        if (!c->given_up.zh)
            return;
        c->given_up.due_ms = now + c->conf.session_timeout_ms;
    }
    if (c->given_up.answered || (c->given_up.due_ms && now >= c->given_up.due_ms))
        zkit__given_up_close(c);
}

/* How long to wait before a new handle after a peer that is not a ZooKeeper server. */
#define BOGUS_PEER_BACKOFF_MS 1000

/*
 * libzookeeper takes the first 40 bytes any peer sends for a handshake reply without checking
 * them, so a port that is not ZooKeeper's (an HTTP server, say) "connects" with a session id,
 * timeout and read-only flag made of its text, and no request ever times out.  A real server
 * grants a positive timeout and a non-zero session, and answers read-only only to a client
 * that allowed it.  Anything else: drop the handle and try again after a pause.
 */
static int handshake_bogus(zkit_client_t *c, int read_only)
{
    const clientid_t *id = zoo_client_id(c->handle.zh);
    int timeout = zoo_recv_timeout(c->handle.zh);
    const char *server;
    if (id->client_id != 0 && timeout > 0 && (!read_only || c->conf.can_be_read_only))
        return 0;
    server = zoo_get_current_server(c->handle.zh);
    zkit__log(&c->log, ZKIT_LOG_ERROR,
              "the server at %s answered with a bogus handshake (session 0x%llx, timeout %d, "
              "read-only %d): not a ZooKeeper server?  Reconnecting",
              server ? server : "?", (unsigned long long)id->client_id, timeout, read_only);
    return 1;
}

static void handle_session_event(zkit_client_t *c, const zkit__session_event_t *ev)
{
    if (ev->generation != c->handle.generation || !c->handle.zh)
        return; /* a late event from a handle already replaced */
    if ((ev->zk_state == ZOO_CONNECTED_STATE || ev->zk_state == ZOO_READONLY_STATE) &&
        handshake_bogus(c, ev->zk_state == ZOO_READONLY_STATE)) {
        zhandle_t *zh = c->handle.zh;
        c->handle.zh = NULL;
        c->handle.connected = 0;
        c->reopen_at_ms = zkit__monotonic_ms() + BOGUS_PEER_BACKOFF_MS;
        close_handle(c, zh, c->handle.generation);
    } else if (ev->zk_state == ZOO_CONNECTED_STATE || ev->zk_state == ZOO_READONLY_STATE) {
        /* The outage is over: how often libzookeeper repeated its complaints, said now. */
        zkit__zk_log_flush(1);
        on_connected(c, ev->zk_state == ZOO_READONLY_STATE, ev->at_ms);
    } else if (ev->zk_state == ZOO_EXPIRED_SESSION_STATE) {
        on_session_lost(c, "expired by the server");
    } else if (ev->zk_state == ZOO_AUTH_FAILED_STATE) {
        on_session_lost(c, "authentication failed");
    } else {
        on_disconnected(c, ev->at_ms);
    }
}

static int64_t next_wakeup(zkit_client_t *c)
{
    int64_t wake = zkit__monotonic_ms() + 1000;
    if (c->timing.timers && c->timing.timers->due_ms < wake)
        wake = c->timing.timers->due_ms;
    if (c->suspended_since_ms && c->handle.negotiated_timeout_ms > 0) {
        int64_t lost_at = c->suspended_since_ms + c->handle.negotiated_timeout_ms;
        if (lost_at < wake)
            wake = lost_at;
    }
    if (!c->handle.zh && c->reopen_at_ms > 0 && c->reopen_at_ms < wake)
        wake = c->reopen_at_ms;
    if (c->given_up.zh && c->given_up.due_ms && c->given_up.due_ms < wake)
        wake = c->given_up.due_ms;
    if (c->handle.connected && !c->confirm.stalled &&
        c->confirm.vouched_ms + vouch_interval(c) < wake)
        wake = c->confirm.vouched_ms + vouch_interval(c);
    if (confirm_active(c)) {
        if (confirm_due(c) < wake)
            wake = confirm_due(c);
        /* Announcing the lapse (but a lapse that cannot be announced must not spin). */
        if (!c->confirm.unconfirmed && c->confirm.confirmed_until_ms < wake &&
            c->confirm.confirmed_until_ms > zkit__monotonic_ms())
            wake = c->confirm.confirmed_until_ms;
    }
    return wake;
}

static void supervise_once(zkit_client_t *c)
{
    int64_t now;
    while (c->events.session_event_count > 0) {
        zkit__session_event_t ev = c->events.session_events[c->events.session_event_head];
        c->events.session_event_head =
            (c->events.session_event_head + 1) % ZKIT__SESSION_EVENT_SLOTS;
        c->events.session_event_count--;
        handle_session_event(c, &ev);
    }
    now = zkit__monotonic_ms();
    vouch(c, now);
    confirm(c, now);
    if (c->suspended_since_ms && c->handle.negotiated_timeout_ms > 0 &&
        now - c->suspended_since_ms >= c->handle.negotiated_timeout_ms)
        give_up_session(c);
    end_given_up(c, now);
    if (!c->handle.zh && !c->closing && zkit__monotonic_ms() >= c->reopen_at_ms)
        replace_handle(c);
    zkit__timers_run(c, zkit__timers_take_due(c, zkit__monotonic_ms()));
    zkit__zk_log_flush(0);
}

/* Closing while connected: let the requests already sent (typically the delete of a lock
 * just released) get their replies, for a bounded time, before the handle goes.  Their
 * outcome is then known rather than abandoned, and libzookeeper, which leaks replies that
 * arrive while it closes, has none left in flight.  Called with c->mu held. */
static void drain_requests(zkit_client_t *c)
{
    struct timespec ts;
    zkit__deadline_timespec(zkit__monotonic_ms() + CLOSE_DRAIN_MS, &ts);
    while ((c->attempts || c->confirm.confirm_in_flight) && c->handle.connected &&
           pthread_cond_timedwait(&c->cond, &c->mu, &ts) == 0)
        ;
}

static void *supervisor_main(void *arg)
{
    zkit_client_t *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->closing) {
        struct timespec ts;
        supervise_once(c);
        if (c->closing || c->events.session_event_count > 0 ||
            (c->timing.timers && (c->timing.timers->due_ms <= zkit__monotonic_ms() ||
                           (c->handle.connected && c->timing.timers->wake_on_connect))))
            continue;
        c->supervisor_sleeps_until_ms = next_wakeup(c);
        zkit__deadline_timespec(c->supervisor_sleeps_until_ms, &ts);
        pthread_cond_timedwait(&c->supervisor_cond, &c->mu, &ts);
        c->supervisor_sleeps_until_ms = 0;
    }
    /* Closing: end every sleeping retry and background task, then close the handle, whose
     * pending completions report ZCLOSING; the timers those arm run at once. */
    zkit__timers_run(c, zkit__timers_take_due(c, zkit__monotonic_ms()));
    /* Holders hear LOST while their nodes still stand: no rival can hold before they do. */
    while (!c->close_told)
        pthread_cond_wait(&c->supervisor_cond, &c->mu);
    drain_requests(c);
    zkit__given_up_close(c);
    if (c->handle.zh) {
        zhandle_t *zh = c->handle.zh;
        c->handle.zh = NULL;
        c->handle.connected = 0;
        close_handle(c, zh, c->handle.generation);
    }
    while (c->timing.timers)
        zkit__timers_run(c, zkit__timers_take_due(c, zkit__monotonic_ms()));
    c->supervisor_done = 1;
    pthread_cond_broadcast(&c->event_cond);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- life cycle ---------------------------------------------------------------------------- */

static int start_threads(zkit_client_t *c)
{
    int rc = zkit__event_delivery_start(c);
    if (rc != 0)
        return rc;
    if (pthread_create(&c->supervisor_thread, NULL, supervisor_main, c) != 0) {
        pthread_mutex_lock(&c->mu);
        __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
        c->supervisor_done = 1;
        pthread_cond_broadcast(&c->event_cond);
        pthread_mutex_unlock(&c->mu);
        zkit__event_delivery_stop(c);
        return ZKIT_ESYSTEM;
    }
    return 0;
}

static int client_new_call(zkit_client_t **out, const zkit_client_options_t *opts)
{
    zkit_client_t *c;
    int rc;
    if (!out)
        return zkit__error_fresh(ZKIT_EINVAL, "client_new: NULL output");
    *out = NULL;
    if ((rc = zkit__options_validate(opts)) != 0)
        return rc;
    if (!(c = zkit__client_alloc(opts)))
        return zkit__error_fresh(ZKIT_ENOMEM, "client_new");
    if ((rc = zkit__options_copy(c, opts)) == 0) {
        pthread_mutex_lock(&c->mu);
        rc = zkit__handle_open(c);
        pthread_mutex_unlock(&c->mu);
    }
    if (rc == 0 && (rc = start_threads(c)) != 0) {
        zookeeper_close(c->handle.zh);
    }
    if (rc != 0) {
        if (rc == ZKIT_ENOMEM)
            zkit__log(&c->log, ZKIT_LOG_ERROR, "out of memory creating a client");
        if (rc == ZKIT_ENOMEM || rc == ZKIT_ESYSTEM)
            zkit__error_fresh(rc, "client_new: starting the client");
        zkit__client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

ZKIT_EXTERN int zkit_client_new(zkit_client_t **out, const zkit_client_options_t *opts)
{
    ZKIT__PUBLIC_CALL(client_new, client_new_call(out, opts));
}

/* The close listeners' walk, on the event thread (or the closing thread in dispatch mode). */
typedef struct close_notice {
    zkit_client_t *client;
    int done;
    zkit__task_t task;
} close_notice_t;

static void tell_close_listeners(void *arg)
{
    close_notice_t *notice = arg;
    zkit_client_t *c = notice->client;
    pthread_mutex_lock(&c->mu);
    zkit__listeners_walk(c, ZKIT_CONN_LOST, 1);
    notice->done = 1;
    pthread_cond_broadcast(&c->event_cond);
    pthread_mutex_unlock(&c->mu);
}

/* Called with c->mu held once closing is set: blocked calls (a callback's among them) are
 * woken with ZKIT_ECLOSED, so the event thread reaches the notice; the supervisor closes the
 * handle only after it (or at once if delivery has already ended, which cannot happen before
 * the close: nobody could be told then). */
static void tell_close_locked(zkit_client_t *c)
{
    close_notice_t notice = { .client = c, .done = 0 };
    if (zkit__post_task_locked(c, &notice.task, tell_close_listeners, &notice, 0) == 0)
        zkit__event_delivery_wait_locked(c, &notice.done);
    c->close_told = 1;
    pthread_cond_broadcast(&c->supervisor_cond);
}

ZKIT_EXTERN void zkit_client_close(zkit_client_t *c)
{
    pthread_t supervisor;
    if (!c)
        return;
    if (zkit__in_callback(c)) {
        zkit__log(&c->log, ZKIT_LOG_ERROR,
                  "zkit_client_close called from a callback of the client; "
                  "ignored (it would wait for itself)");
        return;
    }
    pthread_mutex_lock(&c->mu);
    __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
    supervisor = c->supervisor_thread;
    pthread_cond_broadcast(&c->supervisor_cond);
    pthread_cond_broadcast(&c->cond);
    tell_close_locked(c);
    pthread_mutex_unlock(&c->mu);
    pthread_join(supervisor, NULL);
    zkit__event_delivery_stop(c);
    /* Blocking calls in other threads have been woken with ZKIT_ECLOSED; let them leave. */
    pthread_mutex_lock(&c->mu);
    while (c->active_calls > 0)
        pthread_cond_wait(&c->cond, &c->mu);
    pthread_mutex_unlock(&c->mu);
    /* libzookeeper's lines (from other clients) go to another client's sink from here. */
    zkit__zk_log_unregister(c);
    zkit__client_unref(c);
}

int64_t zkit__client_disconnected_since(zkit_client_t *c)
{
    int64_t since;
    pthread_mutex_lock(&c->mu);
    since = c->suspended_since_ms;
    pthread_mutex_unlock(&c->mu);
    return since ? since : zkit__monotonic_ms();
}

int64_t zkit__client_connection_now(zkit_client_t *c, int *lost, int64_t *disconnected_since)
{
    int64_t session;
    pthread_mutex_lock(&c->mu);
    session = c->handle.session_id;
    *lost = c->state == ZKIT_CONN_LOST || c->closing; /* closing ends the session */
    /* Not connected without a suspension time: before the first connection, while a new
     * session is being made, or closed; count the disconnect from now. */
    if (c->handle.connected && !c->closing) {
        /* Connected as far as libzookeeper knows; it may not know, if this process was held
         * up since the supervisor last vouched for the connection. */
        int64_t now = zkit__monotonic_ms(), since = vouch_stale(c, now) ? vouched_at(c) : 0;
        /* Or the leader may not have heard from us (see confirm()). */
        if ((c->confirm.held_locks > 0 || c->confirm.unconfirmed) &&
            now >= c->confirm.confirmed_until_ms) {
            int64_t lapsed = c->confirm.unconfirmed && c->suspended_since_ms
                                 ? c->suspended_since_ms : c->confirm.confirmed_until_ms;
            if (since == 0 || lapsed < since)
                since = lapsed;
        }
        *disconnected_since = since;
    } else {
        *disconnected_since = c->suspended_since_ms ? c->suspended_since_ms
                                                    : zkit__monotonic_ms();
    }
    pthread_mutex_unlock(&c->mu);
    return session;
}
