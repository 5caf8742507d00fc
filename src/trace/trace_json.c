/*
 * trace_json.c - the device trace as Chrome-trace JSON (the format Perfetto
 * and chrome://tracing read): one process per PE, one thread (track) per
 * recording thread of a block, complete events ("X") for the calls, every
 * time on PE 0's clock in microseconds from the first event.
 *
 * Waits are named by what they waited for: the word, the value, and the PE
 * that released it: the one the call knew (barrier, collective flags) or,
 * for a wait on a signal word, the last put_signal / signal_op of any PE
 * into that word of this PE that ended before the wait did, and for a wait
 * on a packet buffer (symm_pkt_wait) the last put_pkt into it (args.from
 * says which of the two it is).
 *
 * Warps of one block that wait on the same word for the same value at once
 * (a Triton program's threads all run its waits; each warp records one
 * event, its lanes merged on the device) are one slice, on the track of the
 * lowest of their threads, from the first start to the last end, with
 * args.warps and args.lanes saying how many took part.
 *
 * Words the program labelled (symm_trace_label: flags a copy engine or the
 * host writes, which no traced call does) name the waits on them, and give
 * their PE when the label says it (args.from "label").
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "trace/trace.h"

/* Threads per block at most: a track is block * this + thread. */
#define TRACK_THREADS 1024u
/* A signal that lands up to this long after the wait ended (clock error)
 * still counts as the one the wait saw. */
#define SIGNAL_SLACK_NS 2000

typedef struct item {
    const symm_trace_event_t *e;
    int pe;          /* index into doc->pes (= world PE) */
    uint64_t track;
    int64_t t0, t1;  /* ns from the origin, on PE 0's clock */
    size_t idx;      /* position in its PE's buffer */
    uint32_t lanes;  /* lanes the slice stands for (waits merged across warps) */
    uint32_t warps;
    int skip;        /* merged into another item */
} item_t;

typedef struct sig {
    int target;      /* world PE whose word it updates */
    uint64_t off;    /* the word's heap offset */
    int64_t t1;
    int src;         /* world PE that sent it */
    uint64_t value;
    int add;
    int pkt;         /* a put_pkt (value: its flag) */
} sig_t;

typedef struct writer {
    FILE *f;
    const symm__trace_doc_t *doc;
    int first;       /* no event written yet */
} writer_t;

static int cmp_item(const void *pa, const void *pb) {
    const item_t *a = pa, *b = pb;
    if (a->pe != b->pe)
        return a->pe < b->pe ? -1 : 1;
    if (a->track != b->track)
        return a->track < b->track ? -1 : 1;
    if (a->t1 != b->t1)
        return a->t1 < b->t1 ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Waits first, by (PE, block, word, value, start); the rest after. */
static int cmp_wait(const void *pa, const void *pb) {
    const item_t *a = pa, *b = pb;
    int wa = a->e->kind == SYMM_TRACE_WAIT, wb = b->e->kind == SYMM_TRACE_WAIT;
    if (wa != wb)
        return wa ? -1 : 1;
    if (!wa)
        return 0;
    if (a->pe != b->pe)
        return a->pe < b->pe ? -1 : 1;
    if (a->e->block != b->e->block)
        return a->e->block < b->e->block ? -1 : 1;
    if (a->e->addr != b->e->addr)
        return a->e->addr < b->e->addr ? -1 : 1;
    if (a->e->a != b->e->a)
        return a->e->a < b->e->a ? -1 : 1;
    return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

/* One slice for the overlapping waits of one block on one word and value. */
static void merge_waits(item_t *items, size_t n) {
    size_t i = 0;
    qsort(items, n, sizeof *items, cmp_wait);
    while (i < n && items[i].e->kind == SYMM_TRACE_WAIT) {
        item_t *head = &items[i];
        size_t j = i + 1;
        for (; j < n && items[j].e->kind == SYMM_TRACE_WAIT && items[j].pe == head->pe &&
               items[j].e->block == head->e->block && items[j].e->addr == head->e->addr &&
               items[j].e->a == head->e->a && items[j].t0 <= head->t1;
             j++) {
            item_t *o = &items[j];
            if (o->t1 > head->t1)
                head->t1 = o->t1;
            if (o->track < head->track) { /* the slice goes on the lowest thread's track */
                head->track = o->track;
                head->e = o->e;
            }
            head->lanes += o->lanes;
            head->warps += o->warps;
            o->skip = 1;
        }
        i = j;
    }
}

static int cmp_sig(const void *pa, const void *pb) {
    const sig_t *a = pa, *b = pb;
    if (a->target != b->target)
        return a->target < b->target ? -1 : 1;
    if (a->off != b->off)
        return a->off < b->off ? -1 : 1;
    return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

/* The world PE of an event's team-relative peer, or -1. */
static int world_peer(const symm__trace_doc_t *doc, const symm_trace_event_t *e) {
    if (e->peer < 0)
        return -1;
    if (e->team_n == (uint16_t)doc->n_pes)
        return e->peer < doc->n_pes ? e->peer : -1;
    if (doc->node_world && e->team_n == (uint16_t)doc->n_node && e->peer < doc->n_node)
        return doc->node_world[e->peer];
    return -1;
}

/* addr's offset in PE pe's heap; 0 and *ok = 0 when outside it. */
static uint64_t heap_off(const symm__trace_pe_data_t *p, uint64_t addr, int *ok) {
    *ok = addr >= p->heap_base && addr - p->heap_base < p->heap_size;
    return *ok ? addr - p->heap_base : 0;
}

static const char *cmp_str(int cmp) {
    static const char *s[] = {"==", "!=", ">", ">=", "<", "<="};
    return cmp >= 0 && cmp < 6 ? s[cmp] : "?";
}

static const char *coll_str(uint64_t c) {
    switch (c) {
    case SYMM_TRACE_COLL_ALL_REDUCE: return "all_reduce";
    case SYMM_TRACE_COLL_REDUCE_SCATTER: return "reduce_scatter";
    case SYMM_TRACE_COLL_ALL_GATHER: return "all_gather";
    case SYMM_TRACE_COLL_ALL_TO_ALL: return "all_to_all";
    case SYMM_TRACE_COLL_ALL_TO_ALLV: return "all_to_allv";
    case SYMM_TRACE_COLL_BROADCAST: return "broadcast";
    case SYMM_TRACE_COLL_BARRIER: return "coll_barrier";
    case SYMM_TRACE_COLL_MOE_DISPATCH: return "moe_dispatch_send";
    case SYMM_TRACE_COLL_MOE_DISPATCH_RECV: return "moe_dispatch_recv";
    case SYMM_TRACE_COLL_MOE_COMBINE: return "moe_combine_send";
    case SYMM_TRACE_COLL_MOE_COMBINE_RECV: return "moe_combine_recv";
    case SYMM_TRACE_COLL_MOE_HT_DISPATCH: return "moe_ht_dispatch_send";
    case SYMM_TRACE_COLL_MOE_HT_DISPATCH_RECV: return "moe_ht_dispatch_recv";
    case SYMM_TRACE_COLL_MOE_HT_COMBINE: return "moe_ht_combine_send";
    case SYMM_TRACE_COLL_MOE_HT_COMBINE_RECV: return "moe_ht_combine_recv";
    default: return "collective";
    }
}

static const char *algo_str(unsigned a) {
    static const char *s[] = {"auto", "packet", "oneshot", "twoshot", "multimem", "push"};
    return a < 6 ? s[a] : "?";
}

static const char *group_str(unsigned g) {
    return g == SYMM_TRACE_GROUP_BLOCK ? "block" : g == SYMM_TRACE_GROUP_WARP ? "warp" : "thread";
}

static const char *wait_what_str(int w) {
    switch (w) {
    case SYMM_TRACE_WAIT_SIGNAL: return "sig";
    case SYMM_TRACE_WAIT_BARRIER: return "barrier";
    case SYMM_TRACE_WAIT_COLL: return "coll flag";
    case SYMM_TRACE_WAIT_MOE: return "moe";
    case SYMM_TRACE_WAIT_PKT: return "pkt";
    case SYMM_TRACE_WAIT_COLL_PKT: return "coll packets";
    default: return "word";
    }
}

static void fmt_bytes(char *buf, size_t n, uint64_t b) {
    if (b < 1024)
        snprintf(buf, n, "%" PRIu64 " B", b);
    else if (b < (1ull << 20))
        snprintf(buf, n, "%.4g KiB", (double)b / 1024.0);
    else if (b < (1ull << 30))
        snprintf(buf, n, "%.4g MiB", (double)b / 1048576.0);
    else
        snprintf(buf, n, "%.4g GiB", (double)b / 1073741824.0);
}

/* JSON string body (without quotes) of s. */
static void put_str(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* The label of PE d's word at addr (the last one set wins), or NULL. */
static const symm__trace_label_t *find_label(const symm__trace_pe_data_t *d, uint64_t addr) {
    for (int i = d->nlabels - 1; i >= 0; i--)
        if (addr >= d->labels[i].addr && addr - d->labels[i].addr < d->labels[i].nbytes)
            return &d->labels[i];
    return NULL;
}

static const char *region_name(const symm__trace_doc_t *doc, uint64_t id, char *buf, size_t n) {
    for (int i = 0; i < doc->n_names; i++)
        if ((uint64_t)(int64_t)doc->name_ids[i] == id && doc->names[i])
            return doc->names[i];
    snprintf(buf, n, "region %" PRIu64, id);
    return buf;
}

static void sep(writer_t *w) {
    if (!w->first)
        fputs(",\n", w->f);
    w->first = 0;
}

/* The common fields of an event on item it's track. */
static void begin_event(writer_t *w, const item_t *it, const char *ph, const char *name, const char *cat,
                        int64_t t0) {
    sep(w);
    fprintf(w->f, "{\"ph\":\"%s\",\"pid\":%d,\"tid\":%" PRIu64 ",\"ts\":%.3f,\"name\":\"", ph, it->pe, it->track,
            (double)t0 / 1000.0);
    put_str(w->f, name);
    fprintf(w->f, "\",\"cat\":\"%s\"", cat);
}

static void common_args(writer_t *w, const item_t *it) {
    const symm_trace_event_t *e = it->e;
    fprintf(w->f, "\"block\":%u,\"thread\":%u,\"sm\":%u,\"group\":\"%s\"", e->block, e->thread, e->sm,
            group_str(e->group));
    if (it->lanes > 1)
        fprintf(w->f, ",\"lanes\":%u", it->lanes);
    if (it->warps > 1)
        fprintf(w->f, ",\"warps\":%u", it->warps);
}

/* The PE whose signal a wait on (pe, addr) saw: the latest put_signal or
 * signal_op into that word that ended by the wait's end (plus slack). */
static const sig_t *find_signal(const sig_t *sigs, size_t n, int pe, uint64_t off, int64_t t1) {
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first entry >= (pe, off, t1 + slack + 1) */
        size_t mid = lo + (hi - lo) / 2;
        const sig_t *s = &sigs[mid];
        int less = s->target != pe ? s->target < pe : s->off != off ? s->off < off : s->t1 <= t1 + SIGNAL_SLACK_NS;
        if (less)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    const sig_t *s = &sigs[lo - 1];
    return s->target == pe && s->off == off ? s : NULL;
}

static void write_item(writer_t *w, const item_t *it, const sig_t *sigs, size_t nsigs) {
    const symm__trace_doc_t *doc = w->doc;
    const symm_trace_event_t *e = it->e;
    const symm__trace_pe_data_t *me = &doc->pes[it->pe];
    int peer = world_peer(doc, e), in_heap;
    uint64_t off = heap_off(me, e->addr, &in_heap);
    char name[192], bytes[32];
    const char *cat = "sync";
    int64_t dur = it->t1 > it->t0 ? it->t1 - it->t0 : 0;
    const char *from = peer >= 0 ? "call" : NULL;
    const sig_t *s = NULL;
    const symm__trace_label_t *lb = NULL;
    switch (e->kind) {
    case SYMM_TRACE_PUT:
    case SYMM_TRACE_GET:
        fmt_bytes(bytes, sizeof bytes, e->a);
        if (e->kind == SYMM_TRACE_PUT && (e->flags & SYMM_TRACE_F_PKT))
            snprintf(name, sizeof name, "put_pkt %s -> PE %d, flag %" PRIu64, bytes, peer, e->b);
        else
            snprintf(name, sizeof name, "%s %s %s PE %d%s", e->kind == SYMM_TRACE_PUT ? "put" : "get", bytes,
                 e->kind == SYMM_TRACE_PUT ? "->" : "<-", peer, e->flags & SYMM_TRACE_F_NBI ? " (nbi)" : "");
        cat = "transfer";
        break;
    case SYMM_TRACE_PUT_SIGNAL:
        fmt_bytes(bytes, sizeof bytes, e->a);
        snprintf(name, sizeof name, "put_signal %s -> PE %d, sig %s %" PRIu64 "%s", bytes, peer,
                 e->flags & SYMM_TRACE_F_ADD ? "+=" : "=", e->b, e->flags & SYMM_TRACE_F_NBI ? " (nbi)" : "");
        cat = "transfer";
        break;
    case SYMM_TRACE_SIGNAL:
        snprintf(name, sizeof name, "signal -> PE %d, sig %s %" PRIu64, peer,
                 e->flags & SYMM_TRACE_F_ADD ? "+=" : "=", e->a);
        cat = "transfer";
        break;
    case SYMM_TRACE_WAIT: {
        int what = SYMM_TRACE_WAIT_WHAT(e->flags);
        char src[32] = "";
        lb = find_label(me, e->addr);
        if (lb && peer < 0 && lb->pe >= 0) {
            peer = lb->pe;
            from = "label";
        }
        if (peer < 0 && in_heap && what != SYMM_TRACE_WAIT_BARRIER && what != SYMM_TRACE_WAIT_COLL &&
            what != SYMM_TRACE_WAIT_COLL_PKT) {
            s = find_signal(sigs, nsigs, it->pe, off, it->t1);
            if (s) {
                peer = s->src;
                from = "inferred";
            }
        }
        if (peer >= 0)
            snprintf(src, sizeof src, " from PE %d", peer);
        if (what == SYMM_TRACE_WAIT_BARRIER || what == SYMM_TRACE_WAIT_COLL || what == SYMM_TRACE_WAIT_COLL_PKT)
            snprintf(name, sizeof name, "wait %s%s %s %" PRIu64, wait_what_str(what), src,
                     cmp_str(SYMM_TRACE_WAIT_CMP(e->flags)), e->a);
        else
            snprintf(name, sizeof name, "wait %s@0x%" PRIx64 "%s %s %" PRIu64, lb ? lb->name : wait_what_str(what),
                     e->addr, src, cmp_str(SYMM_TRACE_WAIT_CMP(e->flags)), e->a);
        cat = "wait";
        break;
    }
    case SYMM_TRACE_BARRIER:
        snprintf(name, sizeof name, "%s", e->flags & SYMM_TRACE_F_SYNC ? "sync" : "barrier");
        break;
    case SYMM_TRACE_FENCE:
        snprintf(name, sizeof name, "fence");
        break;
    case SYMM_TRACE_QUIET:
        snprintf(name, sizeof name, "quiet");
        break;
    case SYMM_TRACE_COLL:
        if (e->a) {
            fmt_bytes(bytes, sizeof bytes, e->a);
            snprintf(name, sizeof name, "%s %s", coll_str(e->b), bytes);
        } else {
            snprintf(name, sizeof name, "%s", coll_str(e->b));
        }
        cat = "coll";
        break;
    default:
        snprintf(name, sizeof name, "event kind %u", e->kind);
        break;
    }
    begin_event(w, it, "X", name, cat, it->t0);
    fprintf(w->f, ",\"dur\":%.3f,\"args\":{", (double)dur / 1000.0);
    common_args(w, it);
    if (peer >= 0)
        fprintf(w->f, ",\"peer\":%d,\"from\":\"%s\"", peer, from ? from : "call");
    switch (e->kind) {
    case SYMM_TRACE_PUT:
    case SYMM_TRACE_GET:
    case SYMM_TRACE_PUT_SIGNAL:
        fprintf(w->f, ",\"bytes\":%" PRIu64 ",\"nbi\":%d", e->a, (e->flags & SYMM_TRACE_F_NBI) != 0);
        if (e->kind == SYMM_TRACE_PUT && (e->flags & SYMM_TRACE_F_PKT))
            fprintf(w->f, ",\"pkt\":1,\"flag\":%" PRIu64, e->b);
        break;
    case SYMM_TRACE_WAIT:
        fprintf(w->f, ",\"cmp\":\"%s\",\"expected\":%" PRIu64 ",\"seen\":%" PRIu64,
                cmp_str(SYMM_TRACE_WAIT_CMP(e->flags)), e->a, e->b);
        if (s)
            fprintf(w->f, ",\"signal_value\":%" PRIu64 ",\"signal_op\":\"%s\"", s->value,
                    s->pkt ? "put_pkt" : s->add ? "add" : "set");
        if (lb) {
            fputs(",\"label\":\"", w->f);
            put_str(w->f, lb->name);
            fputc('"', w->f);
        }
        break;
    case SYMM_TRACE_COLL:
        fprintf(w->f, ",\"bytes\":%" PRIu64 ",\"algo\":\"%s\",\"stream\":%d", e->a,
                algo_str((e->flags >> 4) & 7u), (e->flags & SYMM_TRACE_F_STREAM) != 0);
        break;
    default:
        break;
    }
    if (e->addr) {
        fprintf(w->f, ",\"addr\":\"0x%" PRIx64 "\"", e->addr);
        if (in_heap)
            fprintf(w->f, ",\"heap_off\":\"0x%" PRIx64 "\"", off);
    }
    fputs("}}", w->f);
}

static void write_region(writer_t *w, const item_t *b, const item_t *end, int64_t t_end, int truncated) {
    char buf[48], name[128];
    const char *n = region_name(w->doc, (b ? b : end)->e->a, buf, sizeof buf);
    if (!b) { /* an end whose begin was not recorded */
        snprintf(name, sizeof name, "%s (end; begin not recorded)", n);
        begin_event(w, end, "i", name, "region", end->t1);
        fputs(",\"s\":\"t\",\"args\":{", w->f);
        common_args(w, end);
        fputs("}}", w->f);
        return;
    }
    if (truncated)
        snprintf(name, sizeof name, "%s (end not recorded)", n);
    else
        snprintf(name, sizeof name, "%s", n);
    begin_event(w, b, "X", name, "region", b->t0);
    fprintf(w->f, ",\"dur\":%.3f,\"args\":{", (double)(t_end > b->t0 ? t_end - b->t0 : 0) / 1000.0);
    common_args(w, b);
    fprintf(w->f, ",\"name_id\":%" PRIu64 "%s}}", b->e->a, truncated ? ",\"truncated\":true" : "");
}

/* One track's events, [lo, hi) of the sorted items: regions paired per
 * name (innermost open one first), the rest as they are. */
static symm_status_t write_track(writer_t *w, const item_t *items, size_t lo, size_t hi, const sig_t *sigs,
                                 size_t nsigs) {
    size_t *open = NULL, nopen = 0;
    int64_t last = items[lo].t1;
    for (size_t i = lo; i < hi; i++) {
        const item_t *it = &items[i];
        if (it->t1 > last)
            last = it->t1;
        if (it->e->kind == SYMM_TRACE_REGION_BEGIN) {
            size_t *grown = realloc(open, (nopen + 1) * sizeof *open);
            if (!grown) {
                free(open);
                return symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory");
            }
            open = grown;
            open[nopen++] = i;
        } else if (it->e->kind == SYMM_TRACE_REGION_END) {
            size_t k = nopen;
            while (k > 0 && items[open[k - 1]].e->a != it->e->a)
                k--;
            if (k == 0) {
                write_region(w, NULL, it, it->t1, 0);
            } else {
                write_region(w, &items[open[k - 1]], it, it->t1, 0);
                memmove(&open[k - 1], &open[k], (nopen - k) * sizeof *open);
                nopen--;
            }
        } else {
            write_item(w, it, sigs, nsigs);
        }
    }
    while (nopen > 0)
        write_region(w, &items[open[--nopen]], NULL, last, 1);
    free(open);
    return SYMM_SUCCESS;
}

static void write_meta(writer_t *w, const item_t *items, size_t n) {
    const symm__trace_doc_t *doc = w->doc;
    for (int p = 0; p < doc->n_pes; p++) {
        const symm__trace_pe_data_t *d = &doc->pes[p];
        char name[160];
        int len = snprintf(name, sizeof name, "PE %d", d->pe);
        if (d->host[0] || d->device >= 0)
            len += snprintf(name + len, sizeof name - (size_t)len, " (%s%sGPU %d)", d->host, d->host[0] ? ", " : "",
                            d->device);
        if (d->dropped)
            snprintf(name + len, sizeof name - (size_t)len, " - %" PRIu64 " events dropped", d->dropped);
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"", p);
        put_str(w->f, name);
        fputs("\"}}", w->f);
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%d}}", p, p);
    }
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && items[i].pe == items[i - 1].pe && items[i].track == items[i - 1].track)
            continue;
        const symm_trace_event_t *e = items[i].e;
        sep(w);
        if (e->thread == 0)
            fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64 ",\"name\":\"thread_name\",\"args\":{\"name\":"
                    "\"block %u\"}}", items[i].pe, items[i].track, e->block);
        else
            fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64 ",\"name\":\"thread_name\",\"args\":{\"name\":"
                    "\"block %u thread %u\"}}", items[i].pe, items[i].track, e->block, e->thread);
        sep(w);
        fprintf(w->f, "{\"ph\":\"M\",\"pid\":%d,\"tid\":%" PRIu64 ",\"name\":\"thread_sort_index\",\"args\":"
                "{\"sort_index\":%" PRIu64 "}}", items[i].pe, items[i].track, items[i].track);
    }
}

static void write_other(writer_t *w, uint64_t origin) {
    const symm__trace_doc_t *doc = w->doc;
    FILE *f = w->f;
    fputs("\"otherData\":{\"symm_trace\":{\"version\":1,\"clock\":\"", f);
    put_str(f, doc->clock_method ? doc->clock_method : "");
    fprintf(f, "\",\"origin_ns\":%" PRIu64 ",\"library_traced\":%d,\"n_pes\":%d,\"pes\":[", origin,
            doc->library_traced, doc->n_pes);
    for (int p = 0; p < doc->n_pes; p++) {
        const symm__trace_pe_data_t *d = &doc->pes[p];
        fprintf(f, "%s{\"pe\":%d,\"host\":\"", p ? "," : "", d->pe);
        put_str(f, d->host);
        fprintf(f, "\",\"device\":%d,\"sms\":%d,\"recorded\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"capacity\":%" PRIu64
                ",\"sub_buffers\":%u,\"timer_resolution_ns\":%u,\"heap_base\":\"0x%" PRIx64 "\",",
                d->device, d->sms, d->recorded, d->dropped, (uint64_t)d->nsub * d->sub_cap, d->nsub, d->timer_res_ns,
                d->heap_base);
        fprintf(f, "\"clock_offset_ns\":%" PRId64 ",\"clock_rtt_ns\":%" PRIu64 ",\"clock_offset_end_ns\":%" PRId64
                ",\"clock_drift_ppm\":%.3f,\"clock_aligned\":%d}",
                d->clk_a.offset, d->clk_a.rtt, d->clk_b.valid ? d->clk_b.offset : d->clk_a.offset,
                symm__trace_clock_drift_ppm(&d->clk_a, &d->clk_b), d->clk_a.valid);
    }
    fputs("],\"names\":{", f);
    for (int i = 0; i < doc->n_names; i++) {
        fprintf(f, "%s\"%d\":\"", i ? "," : "", doc->name_ids[i]);
        put_str(f, doc->names[i] ? doc->names[i] : "");
        fputc('"', f);
    }
    fputs("}}}", f);
}

symm_status_t symm__trace_write_json(FILE *f, const symm__trace_doc_t *doc) {
    size_t n = 0, nsigs = 0, k = 0;
    item_t *items = NULL;
    sig_t *sigs = NULL;
    uint64_t origin = UINT64_MAX;
    writer_t w = {f, doc, 1};
    symm_status_t st = SYMM_SUCCESS;
    for (int p = 0; p < doc->n_pes; p++)
        n += doc->pes[p].nev;
    items = calloc(n ? n : 1, sizeof *items);
    sigs = calloc(n ? n : 1, sizeof *sigs);
    if (!items || !sigs) {
        st = symm__error(SYMM_ERR_NO_MEMORY, "symm_trace_dump: out of host memory for %zu events", n);
        goto out;
    }
    /* times on PE 0's clock; the origin is the earliest start */
    for (int p = 0; p < doc->n_pes; p++) {
        const symm__trace_pe_data_t *d = &doc->pes[p];
        for (size_t j = 0; j < d->nev; j++) {
            uint64_t t0 = symm__trace_to_ref(d->ev[j].t0, &d->clk_a, &d->clk_b);
            if (t0 < origin)
                origin = t0;
        }
    }
    if (origin == UINT64_MAX)
        origin = 0;
    for (int p = 0; p < doc->n_pes; p++) {
        const symm__trace_pe_data_t *d = &doc->pes[p];
        for (size_t j = 0; j < d->nev; j++) {
            const symm_trace_event_t *e = &d->ev[j];
            item_t *it = &items[k++];
            it->e = e;
            it->pe = p;
            it->track = (uint64_t)e->block * TRACK_THREADS + e->thread;
            it->t0 = (int64_t)(symm__trace_to_ref(e->t0, &d->clk_a, &d->clk_b) - origin);
            it->t1 = (int64_t)(symm__trace_to_ref(e->t1 >= e->t0 ? e->t1 : e->t0, &d->clk_a, &d->clk_b) - origin);
            it->idx = j;
            it->lanes = e->lanes ? e->lanes : 1;
            it->warps = 1;
            if (e->kind == SYMM_TRACE_PUT_SIGNAL || e->kind == SYMM_TRACE_SIGNAL ||
                (e->kind == SYMM_TRACE_PUT && (e->flags & SYMM_TRACE_F_PKT))) {
                int target = world_peer(doc, e), ok;
                uint64_t off = heap_off(d, e->addr, &ok);
                if (target >= 0 && ok) {
                    sig_t *s = &sigs[nsigs++];
                    s->target = target;
                    s->off = off;
                    s->t1 = it->t1;
                    s->src = p;
                    s->value = e->kind == SYMM_TRACE_SIGNAL ? e->a : e->b;
                    s->pkt = e->kind == SYMM_TRACE_PUT;
                    s->add = !s->pkt && (e->flags & SYMM_TRACE_F_ADD) != 0;
                }
            }
        }
    }
    merge_waits(items, n);
    k = 0; /* drop the merged ones */
    for (size_t i = 0; i < n; i++)
        if (!items[i].skip)
            items[k++] = items[i];
    n = k;
    qsort(items, n, sizeof *items, cmp_item);
    qsort(sigs, nsigs, sizeof *sigs, cmp_sig);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
    write_meta(&w, items, n);
    for (size_t lo = 0; lo < n && st == SYMM_SUCCESS;) {
        size_t hi = lo + 1;
        while (hi < n && items[hi].pe == items[lo].pe && items[hi].track == items[lo].track)
            hi++;
        st = write_track(&w, items, lo, hi, sigs, nsigs);
        lo = hi;
    }
    if (st != SYMM_SUCCESS)
        goto out;
    fputs("\n],\n", f);
    write_other(&w, origin);
    fputs("}\n", f);
    if (ferror(f))
        st = symm__error(SYMM_ERR_INVALID_ARG, "symm_trace_dump: writing the trace failed");
out:
    free(items);
    free(sigs);
    return st;
}
