# Shared helpers of the tests of growth by splits (024_splits,
# 025_split_crash): table g (id, k) with pmhash index g_k made while it is
# empty, loads of random keys, and the check that the index finds what a
# seqscan finds and pmhash_verify counts every row.
package PmhashGrowth;

use strict;
use warnings;

use Exporter 'import';
use PmhashRecovery;
use Test::More;

our @EXPORT = qw(growth_pair create_g load_sql load shards grow_to_shards check_g);

my $next_id = 1;

# A primary on path $path ('msync', or 'pmem': PMEM_IS_PMEM_FORCE=1) with
# its index files in the data directory, which base backups copy, and
# table g (create_g); and a streaming standby made from a base backup of
# it.  Both started, with the settings $conf (if given) added.
sub growth_pair
{
	my ($path, $conf) = @_;
	my %files = (dir => 'data', force => $path eq 'pmem' ? 1 : 0);
	my $primary = new_node("primary_$path", init => { allows_streaming => 1 }, %files,
		conf => "max_wal_size = 4GB\nwal_keep_size = 4GB\n" . ($conf // ''));
	start_node($primary);
	create_g($primary);
	$primary->backup('empty');
	my $standby = new_node_from_backup("standby_$path", $primary, 'empty', %files,
		restore => { has_streaming => 1 });
	start_node($standby);
	return ($primary, $standby);
}

# Create the extension (if missing), table g and its pmhash index g_k on a
# node, and start the ids of the loads from 1 again.
sub create_g
{
	my ($node) = @_;
	$node->safe_psql('postgres',
		'CREATE EXTENSION IF NOT EXISTS pmhash; CREATE TABLE g (id int8, k int8); '
		  . 'CREATE INDEX g_k ON g USING pmhash (k);');
	$next_id = 1;
	return;
}

# The INSERT of $rows rows with the next ids and random keys into g.
sub load_sql
{
	my ($rows) = @_;
	my $sql = "INSERT INTO g SELECT i, (random() * 1e15)::int8 FROM generate_series($next_id, "
	  . ($next_id + $rows - 1) . ") i";
	$next_id += $rows;
	return $sql;
}

# Insert $rows rows with random keys into g.
sub load
{
	my ($node, $rows) = @_;
	$node->safe_psql('postgres', load_sql($rows));
	return;
}

# The number of shards of g_k.
sub shards
{
	my ($node) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM pmhash_shards('g_k')");
}

# Insert rows until g_k has $target shards: loads of 2,000 rows, of 100
# nearer, and single rows at the end, since splits come in bursts (the
# average is estimated from a sample of the shards) but an insert makes at
# most one.
sub grow_to_shards
{
	my ($node, $target) = @_;
	for (1 .. 5000)
	{
		my $n = shards($node);
		last if $n >= $target - 8;
		load($node, $n < $target - 24 ? 2000 : 100);
	}
	$node->safe_psql('postgres', qq{
		DO \$\$
		DECLARE
			i int8 := $next_id;
		BEGIN
			WHILE (SELECT count(*) FROM pmhash_shards('g_k')) < $target LOOP
				INSERT INTO g VALUES (i, (random() * 1e15)::int8);
				i := i + 1;
			END LOOP;
		END \$\$});
	$next_id += $node->safe_psql('postgres', "SELECT count(*) FROM g WHERE id >= $next_id");
	return;
}

# Check g_k on a node: for a sample of about 2,000 present keys and 500
# absent ones, the rows an index scan finds per key are those a hash join
# over a seqscan finds; pmhash_verify counts every row (and, unless $exact,
# the entries of rows that aborted transactions left, until a VACUUM).
sub check_g
{
	my ($node, $name, $exact) = @_;
	my $sample = 'SELECT k FROM g WHERE id % 997 = 0 UNION SELECT -i FROM generate_series(1, 500) i';
	my $by_index = $node->safe_psql('postgres',
		"SET enable_seqscan = off; SET enable_bitmapscan = off; "
		  . "SELECT md5(string_agg(k || ':' || n, ' ' ORDER BY k)), sum(n) FROM "
		  . "(SELECT s.k, (SELECT count(*) FROM g x WHERE x.k = s.k) AS n FROM ($sample) s) r");
	my $by_seqscan = $node->safe_psql('postgres',
		"SET enable_indexscan = off; SET enable_bitmapscan = off; "
		  . "SELECT md5(string_agg(k || ':' || n, ' ' ORDER BY k)), sum(n) FROM "
		  . "(SELECT s.k, count(g.k) AS n FROM ($sample) s LEFT JOIN g ON g.k = s.k GROUP BY s.k) r");
	my (undef, $found) = split /\|/, $by_index;
	is($by_index, $by_seqscan, "$name: index scans find what the seqscan finds ($found rows)");
	cmp_ok($found, '>', 0, "$name: the sample's present keys were found");
	my ($verified, $rows) = split /\|/,
	  $node->safe_psql('postgres', "SELECT pmhash_verify('g_k'), (SELECT count(*) FROM g)");
	if ($exact)
	{
		is($verified, $rows, "$name: pmhash_verify counts the $rows rows");
	}
	else
	{
		cmp_ok($verified, '>=', $rows, "$name: pmhash_verify counts at least the $rows rows");
	}
	return;
}

1;
