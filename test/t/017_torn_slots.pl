# Slots torn by a crash between commits.
#
# On DAX the access method flushes a transaction's changes and fences them
# only at pre-commit, so a power loss can keep an insert's commit word
# without its slot's TID, which then reads as zeros (src/README, durability
# hazard 2).  Simulated here while the server is down after an immediate
# stop: the valid bit of a blank slot is set in a bucket, and in a posting
# block, stamped after the redo point.  Crash recovery must clear both, so
# that pmhash_verify finds no damage and counts every row, and index scans
# agree with a sequential scan.  Run on the pmem path and on the msync path
# (where the recovery rule is the same).
use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PmhashFiles;
use PmhashRecovery;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Set the valid bit of the first blank free slot of a bucket or posting
# block ($kind) stamped after $redo; returns where, or undef if none.
sub tear_slot
{
	my ($path, $redo, $kind) = @_;
	my $file = read_bytes($path, 0, -s $path);
	my $shard_bits = unpack 'V', substr($file, 40, 4);
	my $desc_unit = unpack 'Q<', substr($file, 48, 8);
	for my $shard (0 .. (1 << $shard_bits) - 1)
	{
		my $desc = unpack 'Q<', substr($file, $desc_unit * $UNIT + 8 * $shard, 8);
		next unless $desc;
		my $unit = $desc & ((1 << 40) - 1);
		my $nbuckets = $desc >> 40;
		my $nposting = unpack 'V', substr($file, $unit * $UNIT + 44, 4);
		# first unit, units, slots per unit, offset of the first TID
		my ($first, $count, $slots, $tids) =
		  $kind eq 'bucket'
		  ? ($unit + 1, $nbuckets, 28, 88)
		  : ($unit + 1 + $nbuckets, $nposting, 37, 32);
		for my $u ($first .. $first + $count - 1)
		{
			my $at = $u * $UNIT;
			my ($commit, $unverified, $lsn) = unpack 'Q<Q<Q<', substr($file, $at, 24);
			next if $lsn <= $redo;
			for my $i (0 .. $slots - 1)
			{
				next if ($commit >> $i) & 1;
				next if substr($file, $at + $tids + 6 * $i, 6) ne "\0" x 6;
				write_bytes($path, $at, pack('Q<', $commit | (1 << $i)));
				return "shard $shard, unit $u, slot $i";
			}
		}
	}
	return undef;
}

for my $path ([ 'pmem', 'shm', 1 ], [ 'msync', 'data', 0 ])
{
	my ($label, $dir, $force) = @$path;
	my $node = new_node("torn_$label", dir => $dir, force => $force);
	start_node($node);
	# key 0 is heavily duplicated: it has a posting chain
	$node->safe_psql(
		'postgres', q{
		CREATE EXTENSION pmhash;
		CREATE TABLE tt (k int8) WITH (autovacuum_enabled = off);
		INSERT INTO tt SELECT g FROM generate_series(1, 20000) g;
		INSERT INTO tt SELECT 0 FROM generate_series(1, 2000);
		CREATE INDEX tt_k ON tt USING pmhash (k);
		CHECKPOINT;
		INSERT INTO tt SELECT g FROM generate_series(20001, 20500) g;
		INSERT INTO tt SELECT 0 FROM generate_series(1, 100);
	});
	my $redo = $node->safe_psql('postgres',
		"SELECT redo_lsn - '0/0' FROM pg_control_checkpoint()");
	my $file = index_path($node, 'postgres', 'tt_k');
	$node->stop('immediate');
	for my $kind ('bucket', 'posting')
	{
		my $where = tear_slot($file, $redo, $kind);
		ok(defined $where,
			"$label: a blank $kind slot stamped after the redo point made valid ("
			  . ($where // 'none found') . ")");
	}
	start_node($node);
	is($node->safe_psql('postgres', "SELECT pmhash_verify('tt_k')"),
		'22600', "$label: after recovery pmhash_verify finds no damage and counts every row");
	for my $keys ('0', '1, 2, 19999, 20000, 20001, 20500, 30000')
	{
		my $sql = "SELECT count(*) FROM tt WHERE k IN ($keys)";
		is($node->safe_psql('postgres', "$FORCE_INDEX $sql"),
			$node->safe_psql('postgres', "$FORCE_SEQ $sql"),
			"$label: an index scan of k IN ($keys) agrees with a seqscan");
	}
	$node->stop;
}

done_testing();
