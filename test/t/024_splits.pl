# Shard splits (linear hashing over the shards) through WAL replay, a
# streaming standby, a crash while splitting and a promotion.
#
# An index made on an empty table (512 shards) grows to 1.8M rows, past
# 2,048 entries per shard, so that inserts split the shard at the split
# pointer one at a time and the index ends with more shards (below the
# 1,024 slots its descriptors have room for, so that the promoted standby
# can split further).  A standby made before the load
# replays the SPLIT records.  A load is cut short by an immediate shutdown
# once it split a shard, and crash recovery must finish or redo the split
# it interrupted; more growth and a VACUUM follow.  All of it on the msync path and on the persistent-memory
# path.  At each step, on every node: the index has as many shards
# as the primary's, a sample of present and absent keys finds through the
# index exactly the rows a seqscan finds, and pmhash_verify counts every
# row.  The promoted standby goes on splitting.  The logs must show no
# error and no crash.  An index grown to 8M rows keeps no space that is
# neither in use nor free.  Last, with no shared memory for more shard
# states, splits stop and shards grow instead.
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashGrowth;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $BATCH = 300000;

# Write skew of two serializable transactions whose reads and writes a
# load that splits shards comes between: each reads an absent key through
# the index, then inserts the key the other read; one of them must fail
# with a serialization failure (predicate locks are taken on shards of the
# depth the file was built with, which splits leave as they are).
sub serializable_across_splits
{
	my ($node, $path) = @_;
	my $split_pointer = shards($node) - 512;
	# two absent keys of the shard at the split pointer (level 9: slot =
	# the top 9 bits of hashint8 read backwards) that its split moves
	my @keys = split /\n/, $node->safe_psql('postgres',
		"SELECT k FROM (SELECT k, hashint8(k)::int8 & 4294967295 AS h "
		  . "FROM generate_series(-1100000, -1000001) k) c "
		  . "WHERE (SELECT sum(((h >> (31 - i)) & 1) << i) FROM generate_series(0, 8) i) = $split_pointer "
		  . "AND (h >> 22) & 1 = 1 ORDER BY k LIMIT 2");
	is(scalar(@keys), 2, "$path: two keys of the shard at the split pointer, $split_pointer");
	my @sessions = map { $node->background_psql('postgres', on_error_stop => 0) } 0 .. 1;
	my $errors = '';

	for my $i (0 .. 1)
	{
		$sessions[$i]->query_safe('SET enable_seqscan = off; SET enable_bitmapscan = off; '
			  . 'BEGIN ISOLATION LEVEL SERIALIZABLE');
		$sessions[$i]->query_safe("SELECT count(*) FROM g WHERE k = $keys[$i]");
	}
	my $before = shards($node);
	load($node, 100000);
	cmp_ok(shards($node), '>', $before, "$path: shards split between the reads and the writes");
	for my $sql ('INSERT INTO g VALUES (0, %d)', 'COMMIT')
	{
		for my $i (0 .. 1)
		{
			my (undef, $failed) = $sessions[$i]->query(sprintf($sql, $keys[1 - $i]));
			$errors .= $sessions[$i]->{stderr} if $failed;
		}
	}
	like($errors, qr/could not serialize access/,
		"$path: a serializable write skew across splits fails one transaction");
	$_->quit for @sessions;
	return;
}

# The whole sequence on one path: 'msync' or 'pmem' (PMEM_IS_PMEM_FORCE=1),
# with the files in the data directory, which the standby's base backup
# copies.
sub run_path
{
	my ($path) = @_;
	my ($primary, $standby) = growth_pair($path);
	my $log_start = log_offset($primary);
	is(shards($primary), '512', "$path: the index made on an empty table has 512 shards");
	my $standby_log = log_offset($standby);

	# 1. growth that splits, cut short by a crash once it split
	load($primary, $BATCH) for 1 .. 3;
	my $before = shards($primary);
	my $bg = $primary->background_psql('postgres', on_error_stop => 0);
	$bg->query_until(qr/started/,
		"\\echo started\n" . load_sql(2 * $BATCH) . ";\n");
	ok(wait_until(60, sub { shards($primary) > $before }),
		"$path: the load splits shards before the crash");
	$primary->stop('immediate');
	eval { $bg->quit };
	start_node($primary);
	check_g($primary, "$path: primary after a crash while splitting");

	# 2. more growth (its pmhash WAL records within the stated 1 MB bound),
	# a VACUUM, the standby replaying it all
	my $from = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	load($primary, $BATCH);
	my $grown = shards($primary);
	cmp_ok($grown, '>', 512, "$path: the index split its shards as it grew ($grown shards)");
	SKIP:
	{
		# the PyPI build of 16 comes without pg_walinspect
		skip 'pg_walinspect is not installed', 2
		  unless $primary->safe_psql('postgres',
			"SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_walinspect'");
		my ($splits, $largest) = split /\|/, $primary->safe_psql('postgres',
			"CREATE EXTENSION IF NOT EXISTS pg_walinspect; "
			  . "SELECT count(*) FILTER (WHERE record_type = 'SPLIT'), max(record_length) "
			  . "FROM pg_get_wal_records_info('$from', pg_current_wal_flush_lsn()) "
			  . "WHERE resource_manager = 'pmhash'");
		cmp_ok($splits, '>', 0, "$path: the growth wrote SPLIT records ($splits)");
		cmp_ok($largest, '<=', 1024 * 1024,
			"$path: no pmhash WAL record of the growth is over 1 MB (largest $largest bytes)");
	}
	my $most = $primary->safe_psql('postgres', "SELECT max(entries) FROM pmhash_shards('g_k')");
	cmp_ok($most, '<', 2 * 2048 + 512, "$path: no shard holds much over twice the target ($most)");
	check_g($primary, "$path: primary after growth");
	serializable_across_splits($primary, $path);
	$primary->safe_psql('postgres', 'DELETE FROM g WHERE id % 5 = 0');
	$primary->safe_psql('postgres', $VACUUM . ' g');
	check_g($primary, "$path: primary after VACUUM", 1);
	$primary->wait_for_catchup($standby);
	is(shards($standby), shards($primary), "$path: the standby has as many shards as the primary");
	check_g($standby, "$path: standby", 1);

	# 3. the promoted standby splits on its own
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'promotion timed out';
	my $at_promotion = shards($standby);
	load($standby, $BATCH) for 1 .. 2;
	cmp_ok(shards($standby), '>', $at_promotion, "$path: the promoted standby splits shards");
	check_g($standby, "$path: promoted standby");

	check_log($primary, $log_start, "$path: primary", qr/could not serialize access/);
	check_log($standby, $standby_log, "$path: standby");
	$standby->stop;
	$primary->stop;
	return;
}

# Splits need shard states in shared memory: with pmhash.max_shards and
# pmhash.max_indexes at their least, the pool has room for the 1,024 slots
# an index built with 512 shards takes when it is attached, not for the
# chunk of the next 1,024.
# Growth past that stops splitting without an error, and the shards grow
# instead.
sub run_without_room
{
	my $node = new_node('room', conf => "pmhash.max_shards = 1024\npmhash.max_indexes = 4\nmax_wal_size = 4GB\n");
	start_node($node);
	my $log_start = log_offset($node);
	create_g($node);
	load($node, $BATCH) for 1 .. 8;
	is(shards($node), '1024',
		'without room for more shard states, splits stop at the 1,024 slots of the attach');
	my $mean = $node->safe_psql('postgres', "SELECT round(avg(entries)) FROM pmhash_shards('g_k')");
	cmp_ok($mean, '>', 2048, "the shards grew past the target instead ($mean entries on average)");
	check_g($node, 'without room for more shard states', 1);
	$node->restart;
	check_g($node, 'without room for more shard states, after a restart', 1);
	check_log($node, $log_start, 'without room for more shard states');
	$node->stop;
	return;
}

# The file of an index that grew by splits from 512 to over 4,000 shards
# holds little besides its segments: every unit is in a segment, the
# descriptor array, the header or the free map (none lost because the free
# map had no room for it), and the file is at most 1.35 times its
# segments (growth adds an eighth of the file at a time).  The same after a restart, which rebuilds the free map.
sub run_space
{
	my $node = new_node('space', conf => "max_wal_size = 4GB\n");
	start_node($node);
	create_g($node);
	load($node, 1000000) for 1 .. 8;
	for my $when ('after growth', 'after a restart')
	{
		$node->restart if $when eq 'after a restart';
		my ($nshards, $file, $free, $segments) = split /\|/, $node->safe_psql('postgres',
			"SELECT shards, file_bytes, free_bytes, "
			  . "(SELECT sum(segment_bytes) FROM pmhash_shards('g_k')) FROM pmhash_stats('g_k')");
		cmp_ok($nshards, '>', 3500, "space, $when: the index split to $nshards shards");
		cmp_ok($file - $free - $segments, '<', 1024 * 1024,
			"space, $when: the file's bytes outside segments and the free map are under 1 MB ("
			  . ($file - $free - $segments) . ")");
		cmp_ok($file, '<=', 1.35 * $segments,
			"space, $when: the file ($file bytes) is at most 1.35 times its segments ($segments)");
	}
	check_g($node, 'space', 1);
	$node->stop;
	return;
}

run_path($_) for qw(msync pmem);
run_space();
run_without_room();
done_testing();
