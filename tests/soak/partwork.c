/*
 * partwork.c - a soak worker's member of the set partitioner (zkit/partition.h): every worker
 * joins one partitioner over SOAK_PART_ITEMS items, and each item it is given is a holder of
 * kind "partition" on the item's lock path, so that the checker's rule for exclusive kinds
 * (no two holders of one path at once, fencing tokens increasing) is the partitioner's: no
 * item owned by two members at once, under the soak's faults.
 *
 * The holder enters at ACQUIRED (E, with the item's fencing token) and stops at RELEASE
 * ("done"), EXPIRED ("deadline") or LOST ("lost"); UNCERTAIN and HELD are logged as states.
 * Callbacks run on the client's event thread, one at a time, so the holders need no lock of
 * their own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zkit.h"
#include "soak.h"
#include "partwork.h"

#define SOAK_PART_ITEMS 12
#define SOAK_PART_SETTLE_MS 300

static int part_worker;
static long part_seq;
static char part_names[SOAK_PART_ITEMS][8];
static const char *part_items[SOAK_PART_ITEMS];
static char part_holders[SOAK_PART_ITEMS][64]; /* the current holder of each item, "" if none */

static int item_index(const char *item)
{
    for (int i = 0; i < SOAK_PART_ITEMS; i++)
        if (strcmp(part_items[i], item) == 0)
            return i;
    return -1;
}

static void on_item(zkit_partition_t *p, const char *item, zkit_partition_event_t ev, void *arg)
{
    int k = item_index(item);
    char *holder;
    int64_t token = 0;
    (void)arg;
    if (k < 0)
        return;
    holder = part_holders[k];
    switch (ev) {
    case ZKIT_PARTITION_ACQUIRED:
        zkit_partition_fencing_token(&token, p, item);
        snprintf(holder, sizeof(part_holders[k]), "p%d.part.%ld", part_worker, part_seq++);
        soak_log('E', "%s partition %s/items/%s %" PRId64 " -1", holder, SOAK_PART, item, token);
        break;
    case ZKIT_PARTITION_UNCERTAIN:
    case ZKIT_PARTITION_HELD:
        if (holder[0])
            soak_log('S', "%s %s", holder, ev == ZKIT_PARTITION_HELD ? "HELD" : "UNCERTAIN");
        break;
    default:
        if (!holder[0])
            break;
        if (ev != ZKIT_PARTITION_RELEASE)
            soak_log('S', "%s %s", holder, ev == ZKIT_PARTITION_EXPIRED ? "EXPIRED" : "LOST");
        soak_log('X', "%s %s -", holder,
                 ev == ZKIT_PARTITION_RELEASE ? "done"
                 : ev == ZKIT_PARTITION_EXPIRED ? "deadline" : "lost");
        holder[0] = '\0';
        break;
    }
}

zkit_partition_t *soak_partition_start(zkit_client_t *c, int worker_id)
{
    zkit_partition_options_t o;
    zkit_partition_t *p;
    char id[16];
    int rc;
    part_worker = worker_id;
    for (int i = 0; i < SOAK_PART_ITEMS; i++) {
        snprintf(part_names[i], sizeof(part_names[i]), "i%02d", i);
        part_items[i] = part_names[i];
    }
    zkit_partition_options_init(&o);
    o.items = part_items;
    o.item_count = SOAK_PART_ITEMS;
    o.settle_ms = SOAK_PART_SETTLE_MS;
    o.item_fn = on_item;
    snprintf(id, sizeof(id), "p%d", worker_id);
    if ((rc = zkit_partition_new(&p, c, SOAK_PART, id, &o)) != 0) {
        fprintf(stderr, "soak worker %d: zkit_partition_new: %s: %s\n", worker_id,
                zkit_strerror(rc), zkit_error_message());
        exit(1);
    }
    return p;
}

void soak_partition_stop(zkit_partition_t *p)
{
    zkit_partition_free(p); /* each item still owned: RELEASE, its X line "done" */
}
