/*-------------------------------------------------------------------------
 *
 * bench_core.c
 *	  Core-level benchmark of pmhash: insert, positive and negative lookup
 *	  throughput with one and two threads, and insert latency while a
 *	  table grows, on a file mapped with libpmem.  No PostgreSQL.
 *
 * Keys are distinct random 64-bit values (a bijective mix of their index),
 * hashed to 32 bits by a 64-to-32 finalizer; the TID of a key encodes its
 * index.  Inserts go in key order, which is random in hash space; positive
 * lookups go through every key in a shuffled order; negative lookups use
 * keys that were never inserted.  Every lookup result is checked: each
 * positive lookup must return its key's TID (counted in the timed loop),
 * and a sample of lookups is checked untimed for stray TIDs, besides a
 * full structural verification of the table after each build.
 *
 * Two insert variants: each insert durable when it returns (the core
 * flushes and fences inside every change), or flushes recorded and made
 * durable with one fence per batch of 64 inserts (as the PostgreSQL glue
 * does at commit).  Both prefetch the home bucket and the shard lock of
 * the key inserted INSERT_DISTANCE inserts later.  Two lookup variants: one
 * key at a time, or batches of keys through the core's batched lookup,
 * which overlaps their cache misses.
 *
 * Threads take the keys in chunks of CHUNK_KEYS from a shared cursor, so
 * that a thread the host slows down does not leave the other idle at the
 * end of a phase; writers lock shards, readers take no lock.  See
 * bench_table.c for reclamation.
 * Runs with one and two threads alternate and each measurement is the
 * median of several runs.  Throughput is reported by the wall clock (what
 * the floors are checked against) and by the CPU time of the busiest
 * thread, which shows what the code does when other processes of a shared
 * machine take CPU time from it.
 *
 * The throughput tables have as many shards as a build of that many
 * entries gets; the latency run grows the 512 shards that an index created
 * empty gets, timing every insert with the TSC.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  test/bench/core/bench_core.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_RDTSC 1
#endif

#include <libpmem.h>

#include "bench_table.h"

#define KEY_SEED			UINT64_C(0x5eed0fb0c0ffee11)
#define TIDS_PER_BLOCK		128
#define INSERT_BATCH		64
#define INSERT_DISTANCE		8		/* inserts prefetch this many keys ahead */
#define LOOKUP_BATCH		256
#define CHUNK_KEYS			65536	/* keys a thread takes at a time */
#define MIN_SHARD_BITS		9		/* what the build gives an empty index */
#define ENTRIES_PER_SHARD	2048	/* what the build aims at per shard */
#define MAX_THREADS			2
#define SAMPLE_CHECKS		200000

/* floors from the performance issue */
#define FLOOR_INSERT_MOPS	5.0
#define FLOOR_POSITIVE_MOPS 14.0
#define FLOOR_NEGATIVE_MOPS 21.0
#define FLOOR_SCALING		1.8
#define FLOOR_P99_RATIO		5.0

typedef enum JobKind
{
	JOB_INSERT,
	JOB_LOOKUP
} JobKind;

/* One thread's share of a phase, and what it measured. */
typedef struct Job
{
	BenchFile  *bf;
	JobKind		kind;
	BenchDurability durability;
	int			batch;			/* lookups: keys per prefetched batch */
	const uint64_t *keys;
	const uint32_t *idx;		/* lookups: index of each key, NULL if absent */
	uint64_t   *cursor;			/* next key no thread has taken */
	uint64_t	nkeys;			/* keys of the phase */
	uint64_t	lo;				/* chunk being worked on */
	uint64_t	hi;
	uint32_t   *lat;			/* inserts: ticks per insert, if wanted */
	uint8_t    *rebuilt;		/* inserts: whether it rebuilt a shard */
	pthread_barrier_t *barrier;
	double		start;
	double		end;
	double		cpu;			/* CPU time of the thread in the phase */
	uint64_t	found;			/* lookups that returned the key's TID */
	uint64_t	ntids;			/* TIDs returned */
	uint64_t	errors;			/* statuses other than PMH_OK */
	uint64_t	fences;
} Job;

/* What a lookup sink counts. */
typedef struct Probe
{
	PmhTid		want;
	uint64_t	found;
	uint64_t	ntids;
} Probe;

/* Throughput of one run: by the wall clock, and as if no one else ran. */
typedef struct Sample
{
	double		wall_mops;		/* operations / wall time */
	double		cpu_mops;		/* operations / CPU time of the busiest thread */
	double		share;			/* CPU time of the threads / (wall time x threads) */
} Sample;

/* Repeated samples of one measurement. */
typedef struct Series
{
	double		wall[16];
	double		cpu[16];
	double		share[16];
	int			n;
} Series;

/* One measured metric, for the table and the CSV file. */
typedef struct Metric
{
	char		name[128];
	char		value[32];
} Metric;

static Metric metrics[256];
static int	nmetrics;
static double tick_ns = 1.0;	/* nanoseconds per timer tick */
static double tick_cost_ns;		/* cost of reading the timer */
static const char *tick_name = "clock_gettime";
static int	failures;			/* wrong results: the run fails */

/* Wall clock in seconds. */
static double
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread in seconds. */
static double
thread_cpu_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

/* Cheap timer for per-insert latency: TSC where there is one. */
static inline uint64_t
tick(void)
{
#ifdef HAVE_RDTSC
	unsigned	aux;

	return __rdtscp(&aux);
#else
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000 + (uint64_t) ts.tv_nsec;
#endif
}

/* Calibrate the timer against CLOCK_MONOTONIC and measure its cost. */
static void
calibrate_timer(void)
{
	double		t0,
				t1;
	uint64_t	c0,
				c1;
	volatile uint64_t sink = 0;
	int			n = 1000000;

#ifdef HAVE_RDTSC
	tick_name = "rdtscp";
	t0 = now_sec();
	c0 = tick();
	do
		t1 = now_sec();
	while (t1 - t0 < 0.2);
	c1 = tick();
	tick_ns = (t1 - t0) * 1e9 / (double) (c1 - c0);
#endif
	t0 = now_sec();
	for (int i = 0; i < n; i++)
		sink += tick();
	t1 = now_sec();
	tick_cost_ns = (t1 - t0) * 1e9 / n;
}

/* Distinct random key of an index: splitmix64, a bijection of the index. */
static inline uint64_t
key_of(uint64_t i)
{
	uint64_t	z = KEY_SEED + (i + 1) * UINT64_C(0x9e3779b97f4a7c15);

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* 64-to-32-bit hash of a key: MurmurHash3's finalizer, high half. */
static inline uint32_t
hash32(uint64_t k)
{
	k ^= k >> 33;
	k *= UINT64_C(0xff51afd7ed558ccd);
	k ^= k >> 33;
	k *= UINT64_C(0xc4ceb9fe1a85ec53);
	k ^= k >> 33;
	return (uint32_t) (k >> 32);
}

/* TID of the key of an index. */
static inline PmhTid
tid_of(uint64_t i)
{
	return pmh_tid_make((uint32_t) (i / TIDS_PER_BLOCK), (uint16_t) (i % TIDS_PER_BLOCK + 1));
}

/* Index of the key a TID stands for. */
static inline uint64_t
index_of(PmhTid tid)
{
	return (uint64_t) pmh_tid_block(tid) * TIDS_PER_BLOCK + tid.offset - 1;
}

/* Small PRNG for shuffling and sampling (xorshift64*). */
static inline uint64_t
next_random(uint64_t *state)
{
	uint64_t	x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(0x2545f4914f6cdd1d);
}

/* Lookup sink: count TIDs and whether the wanted one came. */
static void
probe_sink(void *arg, const PmhTid *tids, int count, uint64_t unverified)
{
	Probe	   *p = arg;

	(void) unverified;
	for (int i = 0; i < count; i++)
		p->found += pmh_tid_equal(tids[i], p->want);
	p->ntids += (uint64_t) count;
}

/* Insert a thread's keys, timing each insert if asked. */
static void
run_inserts(Job *job, BenchWorker *w)
{
	BenchFile  *bf = job->bf;
	int			batched = job->durability == BENCH_DURABLE_BATCH;
	int			pending = 0;

	if (job->lat == NULL)
	{
		for (uint64_t j = job->lo; j < job->hi; j++)
		{
			if (j + INSERT_DISTANCE < job->hi)
				bench_prefetch_insert(w, hash32(job->keys[j + INSERT_DISTANCE]));
			if (bench_insert(w, hash32(job->keys[j]), tid_of(j), j + 1) != PMH_OK)
				job->errors++;
			if (batched && ++pending == INSERT_BATCH)
			{
				bench_worker_sync(w);
				pending = 0;
			}
		}
	}
	else
	{
		uint64_t	prev = tick();

		for (uint64_t j = job->lo; j < job->hi; j++)
		{
			uint64_t	rebuilds = bf->rebuilds;
			uint64_t	t;

			if (bench_insert(w, hash32(job->keys[j]), tid_of(j), j + 1) != PMH_OK)
				job->errors++;
			if (batched && ++pending == INSERT_BATCH)
			{
				bench_worker_sync(w);
				pending = 0;
			}
			t = tick();
			job->lat[j] = t - prev > UINT32_MAX ? UINT32_MAX : (uint32_t) (t - prev);
			job->rebuilt[j] = bf->rebuilds != rebuilds;
			prev = t;
		}
	}
	if (batched)
		bench_worker_sync(w);
}

/* Look up a thread's keys, one at a time or in prefetched batches. */
static void
run_lookups(Job *job, BenchWorker *w)
{
	static const PmhTid none = {0xFFFF, 0xFFFF, 0};
	Probe		probe = {none, 0, 0};

	if (job->batch <= 1)
	{
		for (uint64_t j = job->lo; j < job->hi; j++)
		{
			uint32_t	h = hash32(job->keys[j]);
			PmhSegment	seg;

			probe.want = job->idx ? tid_of(job->idx[j]) : none;
			if (bench_segment(w, h, &seg) && pmh_lookup(&seg, h, probe_sink, &probe) != PMH_OK)
				job->errors++;
		}
	}
	else
	{
		for (uint64_t j = job->lo; j < job->hi; j += LOOKUP_BATCH)
		{
			int			n = job->hi - j < LOOKUP_BATCH ? (int) (job->hi - j) : LOOKUP_BATCH;
			uint32_t	h[LOOKUP_BATCH];
			PmhSegment	seg[LOOKUP_BATCH];
			Probe		probes[LOOKUP_BATCH];
			void	   *args[LOOKUP_BATCH];
			PmhStatus	status[LOOKUP_BATCH];
			PmhPublication pub[LOOKUP_BATCH];
			uint32_t	slot[LOOKUP_BATCH];

			for (int k = 0; k < n; k++)
			{
				h[k] = hash32(job->keys[j + k]);
				slot[k] = bench_mirror_read(w, h[k], &pub[k]);
				probes[k].want = job->idx ? tid_of(job->idx[j + k]) : none;
				probes[k].found = probes[k].ntids = 0;
				args[k] = &probes[k];
			}
			pmh_table_segments(&w->table, slot, pub, n, seg);
			pmh_lookup_batch(seg, h, n, probe_sink, args, status);
			for (int k = 0; k < n; k++)
			{
				probe.found += probes[k].found;
				probe.ntids += probes[k].ntids;
				job->errors += status[k] != PMH_OK;
			}
		}
	}
	job->found += probe.found;
	job->ntids += probe.ntids;
}

/* Take the next chunk of keys into job->lo and job->hi; 0 if none are left. */
static int
take_chunk(Job *job)
{
	uint64_t	lo = __atomic_fetch_add(job->cursor, CHUNK_KEYS, __ATOMIC_RELAXED);

	if (lo >= job->nkeys)
		return 0;
	job->lo = lo;
	job->hi = job->nkeys - lo < CHUNK_KEYS ? job->nkeys : lo + CHUNK_KEYS;
	return 1;
}

/* Thread body: wait for the others, then run the job. */
static void *
job_main(void *arg)
{
	Job		   *job = arg;
	BenchWorker w;
	double		cpu;

	bench_worker_init(&w, job->bf, job->durability);
	pthread_barrier_wait(job->barrier);
	job->start = now_sec();
	cpu = thread_cpu_sec();
	while (take_chunk(job))
	{
		if (job->kind == JOB_INSERT)
			run_inserts(job, &w);
		else
			run_lookups(job, &w);
	}
	job->cpu = thread_cpu_sec() - cpu;
	job->end = now_sec();
	job->fences = w.fences;
	bench_worker_free(&w);
	return NULL;
}

/*
 * Run one phase on nthreads threads, which share out the keys in chunks.
 * Returns its throughput (wall time from the first start to the last end);
 * the jobs hold the counts.
 */
static Sample
run_phase(Job *proto, int nthreads, uint64_t n, Job *jobs)
{
	Sample		sample;
	double		max_cpu = 0;
	double		sum_cpu = 0;
	pthread_t	threads[MAX_THREADS];
	pthread_barrier_t barrier;
	uint64_t	cursor = 0;
	double		start = 1e300;
	double		end = 0;

	pthread_barrier_init(&barrier, NULL, (unsigned) nthreads);
	for (int t = 0; t < nthreads; t++)
	{
		jobs[t] = *proto;
		jobs[t].barrier = &barrier;
		jobs[t].cursor = &cursor;
		jobs[t].nkeys = n;
		if (pthread_create(&threads[t], NULL, job_main, &jobs[t]) != 0)
		{
			fprintf(stderr, "bench_core: could not start a thread\n");
			exit(2);
		}
	}
	for (int t = 0; t < nthreads; t++)
	{
		pthread_join(threads[t], NULL);
		if (jobs[t].start < start)
			start = jobs[t].start;
		if (jobs[t].end > end)
			end = jobs[t].end;
		if (jobs[t].cpu > max_cpu)
			max_cpu = jobs[t].cpu;
		sum_cpu += jobs[t].cpu;
	}
	pthread_barrier_destroy(&barrier);
	bench_file_end_phase(proto->bf);
	sample.wall_mops = (double) n / (end - start) / 1e6;
	sample.cpu_mops = (double) n / max_cpu / 1e6;
	sample.share = sum_cpu / ((end - start) * nthreads);
	return sample;
}

/* Add a sample to a series. */
static void
add_sample(Series *series, Sample sample)
{
	series->wall[series->n] = sample.wall_mops;
	series->cpu[series->n] = sample.cpu_mops;
	series->share[series->n] = sample.share;
	series->n++;
}

/* Record a metric. */
static void
add_metric(const char *name, const char *fmt, double value)
{
	Metric	   *m = &metrics[nmetrics < 255 ? nmetrics++ : nmetrics];

	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->value, sizeof(m->value), fmt, value);
}

/* Record a text metric. */
static void
add_text(const char *name, const char *value)
{
	Metric	   *m = &metrics[nmetrics < 255 ? nmetrics++ : nmetrics];

	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->value, sizeof(m->value), "%s", value);
}

/* Median of a few values (sorts them). */
static double
median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--)
		{
			double		t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * The bound of a durable-each insert on this machine: for each key, an
 * 8-byte store into the second line of a bucket chosen by its hash, in a
 * region as large as the table's buckets at 60% fill, flushed and fenced
 * (the entry), then a store into the bucket's first line, flushed and
 * fenced (its commit) -- the two ordered persists of every durable insert
 * -- and nothing else; with persists = 1, only the second.  Prefetched
 * INSERT_DISTANCE keys ahead, as the inserts are.  One thread; the
 * region's old contents are overwritten (every build initializes the
 * buckets of its segments).
 */
static Sample
measure_persist_bound(BenchFile *bf, const uint64_t *keys, uint64_t n, int persists)
{
	const PmhFileHeader *hdr = (const PmhFileHeader *) bf->base;
	char	   *region = bf->base + hdr->data_unit * PMH_UNIT_SIZE;
	uint64_t	nbuckets = (uint64_t) ((double) n / (PMH_BUCKET_SLOTS * 0.6)) + 1;
	double		t0 = now_sec();
	double		c0 = thread_cpu_sec();
	Sample		sample;

	if (nbuckets > bf->units - hdr->data_unit)
		nbuckets = bf->units - hdr->data_unit;
	for (uint64_t j = 0; j < n; j++)
	{
		char	   *bucket;

		if (j + INSERT_DISTANCE < n)
			__builtin_prefetch(region + ((uint64_t) hash32(keys[j + INSERT_DISTANCE]) * nbuckets >> 32) *
							   PMH_UNIT_SIZE, 1, 3);
		bucket = region + ((uint64_t) hash32(keys[j]) * nbuckets >> 32) * PMH_UNIT_SIZE;
		if (persists == 2)
		{
			*(volatile uint64_t *) (bucket + 64) = j;
			pmem_flush(bucket + 64, sizeof(uint64_t));
			pmem_drain();
		}
		*(volatile uint64_t *) bucket = j;
		pmem_flush(bucket, sizeof(uint64_t));
		pmem_drain();
	}
	sample.wall_mops = (double) n / (now_sec() - t0) / 1e6;
	sample.cpu_mops = (double) n / (thread_cpu_sec() - c0) / 1e6;
	sample.share = sample.wall_mops / sample.cpu_mops;
	return sample;
}

/* Build a table of n keys with nthreads writers. */
static Sample
measure_inserts(BenchFile *bf, uint32_t shard_bits, int nthreads, BenchDurability durability,
				const uint64_t *keys, uint64_t n, uint64_t *fences)
{
	Job			proto;
	Job			jobs[MAX_THREADS];
	Sample		sample;
	uint64_t	errors = 0;

	bench_file_reset(bf, shard_bits);
	memset(&proto, 0, sizeof(proto));
	proto.bf = bf;
	proto.kind = JOB_INSERT;
	proto.durability = durability;
	proto.keys = keys;
	sample = run_phase(&proto, nthreads, n, jobs);
	*fences = 0;
	for (int t = 0; t < nthreads; t++)
	{
		errors += jobs[t].errors;
		*fences += jobs[t].fences;
	}
	if (errors || bf->alloc_failed)
	{
		fprintf(stderr, "bench_core: %llu inserts failed%s\n", (unsigned long long) errors,
				bf->alloc_failed ? " (the file is too small)" : "");
		exit(2);
	}
	return sample;
}

/*
 * Look up n keys with nthreads readers.  Positive lookups (idx given) must
 * each find their key's TID.
 */
static Sample
measure_lookups(BenchFile *bf, int nthreads, int batch, const uint64_t *keys,
				const uint32_t *idx, uint64_t n, uint64_t *ntids)
{
	Job			proto;
	Job			jobs[MAX_THREADS];
	Sample		sample;
	uint64_t	found = 0;
	uint64_t	errors = 0;

	memset(&proto, 0, sizeof(proto));
	proto.bf = bf;
	proto.kind = JOB_LOOKUP;
	proto.durability = BENCH_DURABLE_EACH;
	proto.batch = batch;
	proto.keys = keys;
	proto.idx = idx;
	sample = run_phase(&proto, nthreads, n, jobs);
	*ntids = 0;
	for (int t = 0; t < nthreads; t++)
	{
		found += jobs[t].found;
		errors += jobs[t].errors;
		*ntids += jobs[t].ntids;
	}
	if (errors || (idx && found != n))
	{
		fprintf(stderr, "WRONG: %s lookups, %d thread(s): %llu of %llu keys found, %llu errors\n",
				idx ? "positive" : "negative", nthreads, (unsigned long long) found,
				(unsigned long long) n, (unsigned long long) errors);
		failures++;
	}
	return sample;
}

/* TIDs a lookup of the sample check returned. */
typedef struct Collect
{
	int			count;			/* all of them, even past the array */
	PmhTid		tids[64];
} Collect;

/* Lookup sink of the sample check: keep every TID. */
static void
collect_sink(void *arg, const PmhTid *tids, int count, uint64_t unverified)
{
	Collect    *c = arg;

	(void) unverified;
	for (int i = 0; i < count; i++, c->count++)
	{
		if (c->count < 64)
			c->tids[c->count] = tids[i];
	}
}

/*
 * Untimed checks of a built table: the core's structural verification,
 * and a sample of positive and negative lookups whose every returned TID
 * must belong to a key of the probed hash.  Returns 0 if all is well.
 */
static int
check_table(BenchFile *bf, const uint64_t *keys, uint64_t n, const char *what)
{
	BenchWorker w;
	uint64_t	live;
	const char *err;
	uint64_t	rng = UINT64_C(0x9e3779b97f4a7c15) ^ n;
	uint64_t	bad = 0;
	uint64_t	collisions = 0;
	double		t0 = now_sec();

	err = bench_verify(bf, &live);
	if (err == NULL && live != n)
		err = "the table holds a different number of entries than inserted";
	if (err)
	{
		fprintf(stderr, "WRONG: table after %s: %s (%llu live of %llu)\n", what, err,
				(unsigned long long) live, (unsigned long long) n);
		failures++;
		return 1;
	}
	bench_worker_init(&w, bf, BENCH_DURABLE_EACH);
	for (int s = 0; s < 2 * SAMPLE_CHECKS; s++)
	{
		int			positive = s < SAMPLE_CHECKS;
		uint64_t	i = next_random(&rng) % n;
		uint64_t	key = positive ? keys[i] : key_of(n + i);
		uint32_t	h = hash32(key);
		Collect		out;
		PmhSegment	seg;
		int			got = 0;

		out.count = 0;
		if (bench_segment(&w, h, &seg) && pmh_lookup(&seg, h, collect_sink, &out) != PMH_OK)
			bad++;
		if (out.count > 64)
			bad++;				/* 64 keys of one hash code: not among random keys */
		for (int k = 0; k < out.count && k < 64; k++)
		{
			uint64_t	idx = index_of(out.tids[k]);

			if (idx >= n || pmh_canonical_hash(hash32(keys[idx]), bf->shard_bits) !=
				pmh_canonical_hash(h, bf->shard_bits))
				bad++;			/* a TID of another hash code, or of no key */
			else if (positive && idx == i)
				got++;
			else
				collisions++;
			for (int m = 0; m < k; m++)
				bad += pmh_tid_equal(out.tids[m], out.tids[k]);	/* a TID twice */
		}
		if (positive && got != 1)
			bad++;
	}
	bench_worker_free(&w);
	if (bad)
	{
		fprintf(stderr, "WRONG: table after %s: %llu wrong lookup results in a sample of %d\n",
				what, (unsigned long long) bad, 2 * SAMPLE_CHECKS);
		failures++;
		return 1;
	}
	printf("  checked the table after %s: structure sound, %llu entries, %d sampled lookups "
		   "right (%llu hash collisions), %.1f s\n", what, (unsigned long long) live,
		   2 * SAMPLE_CHECKS, (unsigned long long) collisions, now_sec() - t0);
	return 0;
}

/* Sort 32-bit values (LSD radix sort, scratch of the same size). */
static void
sort_u32(uint32_t *v, uint32_t *scratch, uint64_t n)
{
	uint32_t   *src = v;
	uint32_t   *dst = scratch;

	for (int shift = 0; shift < 32; shift += 8)
	{
		uint64_t	offsets[257] = {0};
		uint32_t   *tmp;

		for (uint64_t i = 0; i < n; i++)
			offsets[((src[i] >> shift) & 0xFF) + 1]++;
		for (int d = 0; d < 256; d++)
			offsets[d + 1] += offsets[d];
		for (uint64_t i = 0; i < n; i++)
			dst[offsets[(src[i] >> shift) & 0xFF]++] = src[i];
		tmp = src;
		src = dst;
		dst = tmp;
	}
}

/* Value at a percentile of sorted ticks, in nanoseconds. */
static double
percentile_ns(const uint32_t *sorted, uint64_t n, double pct)
{
	uint64_t	rank = (uint64_t) (pct / 100.0 * (double) n);

	if (rank >= n)
		rank = n - 1;
	return sorted[rank] * tick_ns;
}

/* Print a floor check and record it; returns 1 if it passed. */
static int
check_floor(const char *name, double value, double floor, int at_most)
{
	int			ok = at_most ? value <= floor : value >= floor;
	char		metric[128];

	snprintf(metric, sizeof(metric), "check_%s", name);
	add_text(metric, ok ? "PASS" : "FAIL");
	return ok;
}

/* Write the CSV lines. */
static void
write_csv(const char *path)
{
	FILE	   *f = fopen(path, "w");

	if (f == NULL)
	{
		fprintf(stderr, "bench_core: could not write \"%s\": %s\n", path, strerror(errno));
		exit(2);
	}
	for (int i = 0; i < nmetrics; i++)
		fprintf(f, "core,%s,%s\n", metrics[i].name, metrics[i].value);
	fclose(f);
}

/* Usage message. */
static void
usage(void)
{
	fprintf(stderr,
			"usage: bench_core [-n keys] [-f file] [-o csv] [-r reps] [-P]\n"
			"  -n keys   keys to insert and look up (default 10000000)\n"
			"  -f file   file to create, on a DAX or PMEM_IS_PMEM_FORCE=1 file system\n"
			"            (default /dev/shm/pmhash-bench-core-PID)\n"
			"  -o csv    where the core,<metric>,<value> lines go (default: none)\n"
			"  -r reps   repetitions of each throughput measurement, median reported\n"
			"            (default 3)\n"
			"  -P        do not prefault the mapping\n"
			"  -O part   run only one part, for profiling: insert, lookup or growth\n");
	exit(2);
}

/* The load average over the last minute. */
static double
load_average(void)
{
	FILE	   *f = fopen("/proc/loadavg", "r");
	double		load = -1;

	if (f)
	{
		if (fscanf(f, "%lf", &load) != 1)
			load = -1;
		fclose(f);
	}
	return load;
}

/*
 * Print one row of the throughput tables and record its metrics: medians
 * by the wall clock (what the floors are checked against) and by CPU time.
 */
static void
report_row(const char *label, const char *name, Series *one, Series *two, double floor)
{
	char		metric[96];
	double		w1;
	double		w2;
	double		c1;
	double		c2;
	double		share2;
	int			ok1;
	int			ok2;
	int			okc;

	if (one->n == 0 || two->n == 0)
		return;
	w1 = median(one->wall, one->n);
	w2 = median(two->wall, two->n);
	c1 = median(one->cpu, one->n);
	c2 = median(two->cpu, two->n);
	share2 = median(two->share, two->n);

	snprintf(metric, sizeof(metric), "%s_1t_mops", name);
	add_metric(metric, "%.3f", w1);
	snprintf(metric, sizeof(metric), "%s_2t_mops", name);
	add_metric(metric, "%.3f", w2);
	snprintf(metric, sizeof(metric), "%s_scaling", name);
	add_metric(metric, "%.3f", w2 / w1);
	snprintf(metric, sizeof(metric), "%s_1t_cpu_mops", name);
	add_metric(metric, "%.3f", c1);
	snprintf(metric, sizeof(metric), "%s_2t_cpu_mops", name);
	add_metric(metric, "%.3f", c2);
	snprintf(metric, sizeof(metric), "%s_scaling_cpu", name);
	add_metric(metric, "%.3f", c2 / c1);
	snprintf(metric, sizeof(metric), "%s_2t_cpu_share", name);
	add_metric(metric, "%.3f", share2);
	snprintf(metric, sizeof(metric), "%s_1t", name);
	ok1 = check_floor(metric, w1, floor, 0);
	snprintf(metric, sizeof(metric), "%s_scaling", name);
	ok2 = check_floor(metric, w2 / w1, FLOOR_SCALING, 0);
	snprintf(metric, sizeof(metric), "%s_scaling_cpu", name);
	okc = check_floor(metric, c2 / c1, FLOOR_SCALING, 0);
	printf("%-32s %7.2f %7.2f %6.2fx  >=%5.1f %s  >=%.1fx %s | %7.2f %7.2f %6.2fx %s %4.0f%%\n",
		   label, w1, w2, w2 / w1, floor, ok1 ? "PASS" : "FAIL", FLOOR_SCALING,
		   ok2 ? "PASS" : "FAIL", c1, c2, c2 / c1, okc ? "PASS" : "FAIL", 100 * share2);
}

/* Run everything and report. */
int
main(int argc, char **argv)
{
	uint64_t	n = 10000000;
	int			reps = 3;
	int			prefault = 1;
	const char *only = NULL;
	const char *csv = NULL;
	char		path[256];
	uint32_t	lookup_bits = MIN_SHARD_BITS;
	uint32_t	growth_bits = MIN_SHARD_BITS;
	uint64_t   *keys;
	uint64_t   *lkeys;
	uint32_t   *lidx;
	uint64_t   *nkeys;
	uint64_t	rng = UINT64_C(0x243f6a8885a308d3);
	BenchFile  *bf;
	uint64_t	bytes;
	double		start = now_sec();
	double		load_start = load_average();
	Series		ins[2][2];		/* [durability][threads - 1] */
	Series		bound[2];		/* [persists - 1] per insert, 1 thread */
	Series		look[4][2];		/* [positive single, batch, negative single, batch][threads - 1] */
	uint64_t	fences[2] = {0, 0};
	uint64_t	ntids[4] = {0, 0, 0, 0};
	uint64_t	segments = 0;
	uint64_t	high_water = 0;
	int			opt;

	snprintf(path, sizeof(path), "/dev/shm/pmhash-bench-core-%d", (int) getpid());
	while ((opt = getopt(argc, argv, "n:f:o:r:PO:")) != -1)
	{
		switch (opt)
		{
			case 'n':
				n = strtoull(optarg, NULL, 10);
				break;
			case 'f':
				snprintf(path, sizeof(path), "%s", optarg);
				break;
			case 'o':
				csv = optarg;
				break;
			case 'r':
				reps = atoi(optarg);
				break;
			case 'P':
				prefault = 0;
				break;
			case 'O':
				only = optarg;
				break;
			default:
				usage();
		}
	}
	if (n < 1000 || n > (UINT64_C(1) << 31) || reps < 1 || reps > 16 ||
		(only && strcmp(only, "insert") != 0 && strcmp(only, "lookup") != 0 &&
		 strcmp(only, "growth") != 0))
		usage();
	while (lookup_bits < PMH_MAX_SHARD_BITS &&
		   (double) n > (double) ENTRIES_PER_SHARD * (double) (UINT64_C(1) << lookup_bits))
		lookup_bits++;
	memset(ins, 0, sizeof(ins));
	memset(bound, 0, sizeof(bound));
	memset(look, 0, sizeof(look));

	/* keys: inserted ones in key order, the same shuffled, absent ones */
	keys = malloc(n * sizeof(uint64_t));
	lkeys = malloc(n * sizeof(uint64_t));
	lidx = malloc(n * sizeof(uint32_t));
	nkeys = malloc(n * sizeof(uint64_t));
	if (!keys || !lkeys || !lidx || !nkeys)
	{
		fprintf(stderr, "bench_core: out of memory for the keys\n");
		return 2;
	}
	for (uint64_t i = 0; i < n; i++)
	{
		keys[i] = key_of(i);
		nkeys[i] = key_of(n + i);
		lidx[i] = (uint32_t) i;
	}
	for (uint64_t i = n - 1; i > 0; i--)
	{
		uint64_t	j = next_random(&rng) % (i + 1);
		uint32_t	t = lidx[i];

		lidx[i] = lidx[j];
		lidx[j] = t;
	}
	for (uint64_t i = 0; i < n; i++)
		lkeys[i] = keys[lidx[i]];

	/*
	 * File size: a phase frees nothing until it ends, so the file must hold
	 * every segment the growth of a phase creates.  A growing shard doubles
	 * its buckets at each rebuild, so the segments of a shard add up to
	 * about twice its last one; the last ones hold n entries at no less
	 * than the rebuild fill.  Twice that again leaves room to spare.
	 */
	bytes = (uint64_t) ((double) n / (PMH_BUCKET_SLOTS * PMH_REBUILD_FILL) * 4.0 * PMH_UNIT_SIZE)
		+ (UINT64_C(64) << 20);
	bf = bench_file_open(path, bytes, prefault);
	calibrate_timer();

	printf("pmhash core benchmark: %llu keys, file %s (%.0f MB, is_pmem=%d%s), match %s\n",
		   (unsigned long long) n, path, (double) bytes / 1048576.0, bf->is_pmem,
		   prefault ? ", prefaulted" : "", pmh_match_impl());
	printf("throughput tables: %u shards (as a build of %llu entries); growth run: %u shards; "
		   "median of %d runs\n", 1u << lookup_bits, (unsigned long long) n,
		   1u << growth_bits, reps);
	printf("timer: %s, %.3f ns per tick, %.1f ns per read; %ld CPUs online, load average %.2f\n",
		   tick_name, tick_ns, tick_cost_ns, sysconf(_SC_NPROCESSORS_ONLN), load_start);
	if (!bf->is_pmem)
		printf("WARNING: libpmem does not treat the file as persistent memory: "
			   "set PMEM_IS_PMEM_FORCE=1 or use a DAX file system\n");
	fflush(stdout);
	add_metric("entries", "%.0f", (double) n);
	add_metric("shards", "%.0f", (double) (1u << lookup_bits));
	add_metric("growth_shards", "%.0f", (double) (1u << growth_bits));
	add_metric("is_pmem", "%.0f", (double) bf->is_pmem);
	add_text("match_impl", pmh_match_impl());
	add_metric("reps", "%.0f", (double) reps);
	add_metric("cpus", "%.0f", (double) sysconf(_SC_NPROCESSORS_ONLN));
	add_metric("load_average_start", "%.2f", load_start);

	/*
	 * Inserts: each run builds the table from empty.  One and two threads
	 * alternate, so that both meet the same share of outside noise.
	 */
	for (int r = 0; r < reps && (!only || strcmp(only, "insert") == 0); r++)
	{
		for (int persists = 2; persists >= 1; persists--)
		{
			Sample		sample = measure_persist_bound(bf, keys, n, persists);

			add_sample(&bound[persists - 1], sample);
			printf("  run %d: bound of a durable-each insert, %d ordered persist(s): %.2f Mops/s\n",
				   r + 1, persists, sample.wall_mops);
		}
		for (int dur = 0; dur <= 1; dur++)
		{
			for (int threads = 1; threads <= 2; threads++)
			{
				uint64_t	f;
				Sample		sample = measure_inserts(bf, lookup_bits, threads,
													 dur ? BENCH_DURABLE_BATCH : BENCH_DURABLE_EACH,
													 keys, n, &f);

				add_sample(&ins[dur][threads - 1], sample);
				if (bf->high_water > high_water)
					high_water = bf->high_water;
				if (threads == 1)
				{
					fences[dur] = f;
					segments = bf->rebuilds;
				}
				printf("  run %d: insert, %d thread(s), durable %s: %.2f Mops/s (%.0f%% CPU)\n",
					   r + 1, threads, dur ? "per 64 inserts" : "each insert",
					   sample.wall_mops, 100 * sample.share);
				fflush(stdout);
				if (r == 0)
				{
					char		what[64];

					snprintf(what, sizeof(what), "%d-thread inserts durable %s", threads,
							 dur ? "per 64" : "each");
					check_table(bf, keys, n, what);
				}
			}
		}
	}

	/* lookups, on the last table built; one and two threads alternate */
	if (only && strcmp(only, "lookup") == 0)
	{
		uint64_t	f;

		measure_inserts(bf, lookup_bits, 1, BENCH_DURABLE_BATCH, keys, n, &f);
	}
	for (int r = 0; r < reps && (!only || strcmp(only, "lookup") == 0); r++)
	{
		for (int v = 0; v < 4; v++)
		{
			int			negative = v >= 2;
			int			batch = v % 2 ? LOOKUP_BATCH : 1;

			for (int threads = 1; threads <= 2; threads++)
			{
				Sample		sample = measure_lookups(bf, threads, batch,
													 negative ? nkeys : lkeys,
													 negative ? NULL : lidx, n, &ntids[v]);

				add_sample(&look[v][threads - 1], sample);
				printf("  run %d: %s lookup, %s, %d thread(s): %.2f Mops/s (%.0f%% CPU, %llu TIDs)\n",
					   r + 1, negative ? "negative" : "positive",
					   batch > 1 ? "batched" : "one at a time", threads,
					   sample.wall_mops, 100 * sample.share, (unsigned long long) ntids[v]);
				fflush(stdout);
			}
		}
	}

	/* insert latency while the shards of an empty index grow to n entries */
	if (!only || strcmp(only, "growth") == 0)
	{
		Job			proto;
		Job			jobs[1];
		uint32_t   *lat = malloc(n * sizeof(uint32_t));
		uint32_t   *scratch = malloc(n * sizeof(uint32_t));
		uint32_t   *plain = malloc(n * sizeof(uint32_t));
		uint8_t    *rebuilt = malloc(n);
		Sample		sample;
		double		p[5];
		static const double pcts[4] = {50, 90, 99, 99.9};
		static const char *const pnames[4] = {"p50", "p90", "p99", "p999"};
		uint64_t	nrebuilt = 0;
		uint64_t	rebuild_ticks = 0;
		uint64_t	total_ticks = 0;
		uint64_t	nplain = 0;
		double		ratio;
		char		metric[96];
		int			ok;

		bench_file_reset(bf, growth_bits);
		memset(&proto, 0, sizeof(proto));
		proto.bf = bf;
		proto.kind = JOB_INSERT;
		proto.durability = BENCH_DURABLE_EACH;
		proto.keys = keys;
		proto.lat = lat;
		proto.rebuilt = rebuilt;
		sample = run_phase(&proto, 1, n, jobs);
		if (jobs[0].errors || bf->alloc_failed)
		{
			fprintf(stderr, "bench_core: growth run: %llu inserts failed%s\n",
					(unsigned long long) jobs[0].errors,
					bf->alloc_failed ? " (the file is too small)" : "");
			return 2;
		}
		if (bf->high_water > high_water)
			high_water = bf->high_water;
		printf("  growth run: %.2f Mops/s including the timer (%.0f%% CPU), %llu segments written\n",
			   sample.wall_mops, 100 * sample.share, (unsigned long long) bf->rebuilds);
		check_table(bf, keys, n, "the growth run");

		/* the inserts that rebuilt a shard apart, then all of them */
		for (uint64_t j = 0; j < n; j++)
		{
			total_ticks += lat[j];
			if (rebuilt[j])
			{
				nrebuilt++;
				rebuild_ticks += lat[j];
			}
			else
				plain[nplain++] = lat[j];
		}
		sort_u32(plain, scratch, nplain);
		sort_u32(lat, scratch, n);
		for (int k = 0; k < 4; k++)
			p[k] = percentile_ns(lat, n, pcts[k]);
		p[4] = lat[n - 1] * tick_ns;
		ratio = p[2] / p[0];
		for (int k = 0; k < 4; k++)
		{
			snprintf(metric, sizeof(metric), "grow_insert_%s_ns", pnames[k]);
			add_metric(metric, "%.0f", p[k]);
		}
		add_metric("grow_insert_max_ns", "%.0f", p[4]);
		add_metric("grow_insert_p99_over_p50", "%.2f", ratio);
		add_metric("grow_insert_norebuild_p99_ns", "%.0f", percentile_ns(plain, nplain, 99));
		add_metric("grow_insert_norebuild_p999_ns", "%.0f", percentile_ns(plain, nplain, 99.9));
		add_metric("grow_insert_norebuild_max_ns", "%.0f", plain[nplain - 1] * tick_ns);
		add_metric("grow_insert_mops", "%.3f", sample.wall_mops);
		add_metric("grow_insert_cpu_share", "%.3f", sample.share);
		add_metric("grow_rebuilds", "%.0f", (double) nrebuilt);
		add_metric("grow_rebuild_time_share", "%.4f",
				   (double) rebuild_ticks / (double) total_ticks);
		add_metric("timer_read_ns", "%.1f", tick_cost_ns);
		ok = check_floor("grow_insert_p99_over_p50", ratio, FLOOR_P99_RATIO, 1);

		printf("\ninsert latency, 1 thread, %u shards growing from empty to %llu entries, "
			   "each insert durable (one timer read of %.0f ns included):\n",
			   1u << growth_bits, (unsigned long long) n, tick_cost_ns);
		printf("  p50 %.0f ns   p90 %.0f ns   p99 %.0f ns   p99.9 %.0f ns   max %.0f ns\n",
			   p[0], p[1], p[2], p[3], p[4]);
		printf("  p99/p50 = %.2f   floor <= %.1f   %s\n", ratio, FLOOR_P99_RATIO,
			   ok ? "PASS" : "FAIL");
		printf("  %llu inserts rebuilt a shard and took %.1f%% of all insert time; without them: "
			   "p99 %.0f ns, p99.9 %.0f ns, max %.0f ns\n",
			   (unsigned long long) nrebuilt,
			   100.0 * (double) rebuild_ticks / (double) total_ticks,
			   percentile_ns(plain, nplain, 99), percentile_ns(plain, nplain, 99.9),
			   plain[nplain - 1] * tick_ns);
		free(lat);
		free(scratch);
		free(plain);
		free(rebuilt);
	}

	if (ins[0][0].n > 0 || look[0][0].n > 0)
	{
		printf("\n%-32s %-48s | %s\n", "", "by the wall clock (floors)",
			   "by CPU time (as if alone), 2-thread CPU share");
		printf("%-32s %7s %7s %7s  %-10s %-12s | %7s %7s %7s\n", "throughput, Mops/s",
			   "1 thr", "2 thr", "scaling", "1-thr floor", "scaling floor", "1 thr", "2 thr",
			   "scaling");
	}
	report_row("insert, durable each insert", "insert_each", &ins[0][0], &ins[0][1],
			   FLOOR_INSERT_MOPS);
	report_row("insert, durable per 64 inserts", "insert_batch64", &ins[1][0], &ins[1][1],
			   FLOOR_INSERT_MOPS);
	report_row("positive lookup, one at a time", "lookup_pos_single", &look[0][0], &look[0][1],
			   FLOOR_POSITIVE_MOPS);
	report_row("positive lookup, batched", "lookup_pos_batch", &look[1][0], &look[1][1],
			   FLOOR_POSITIVE_MOPS);
	report_row("negative lookup, one at a time", "lookup_neg_single", &look[2][0], &look[2][1],
			   FLOOR_NEGATIVE_MOPS);
	report_row("negative lookup, batched", "lookup_neg_batch", &look[3][0], &look[3][1],
			   FLOOR_NEGATIVE_MOPS);
	if (bound[0].n > 0)
	{
		double		two = median(bound[1].wall, bound[1].n);
		double		one = median(bound[0].wall, bound[0].n);

		add_metric("insert_each_bound_two_persists_mops", "%.3f", two);
		add_metric("insert_each_bound_one_persist_mops", "%.3f", one);
		printf("%-32s %7.2f  (two ordered persists per insert and nothing else; one: %.2f)\n",
			   "bound of a durable-each insert", two, one);
	}
	if (ins[0][0].n > 0)
	{
		add_metric("insert_each_fences_per_insert", "%.3f", (double) fences[0] / n);
		add_metric("insert_batch64_fences_per_insert", "%.4f", (double) fences[1] / n);
		add_metric("insert_segments_written", "%.0f", (double) segments);
		printf("\n%.2f fences per insert durable each, %.4f per insert durable per 64; "
			   "%llu segments written by a build\n", (double) fences[0] / n,
			   (double) fences[1] / n, (unsigned long long) segments);
	}
	if (look[2][0].n > 0)
		add_metric("negative_lookup_tids", "%.0f", (double) ntids[2]);
	add_metric("file_mb_used", "%.0f", (double) high_water * PMH_UNIT_SIZE / 1048576.0);
	add_metric("load_average_end", "%.2f", load_average());
	add_metric("runtime_s", "%.1f", now_sec() - start);
	add_metric("wrong_results", "%.0f", (double) failures);
	printf("file space used at most %.0f MB; load average %.2f at the start, %.2f at the end; "
		   "runtime %.1f s\n%s\n", (double) high_water * PMH_UNIT_SIZE / 1048576.0, load_start,
		   load_average(), now_sec() - start,
		   failures ? "WRONG RESULTS (see above)" : "all lookup results right");

	if (csv)
		write_csv(csv);
	bench_file_close(bf);
	free(keys);
	free(lkeys);
	free(lidx);
	free(nkeys);
	return failures ? 1 : 0;
}
