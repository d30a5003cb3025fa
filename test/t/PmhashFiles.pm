# Shared helpers of the pmhash file tests (001_files, 006_damage,
# 007_damaged_files, 008_unlogged_temp, 009_databases): nodes for them, SQL
# run with verbose error reports and checks of those reports, the names,
# paths and modes of index files, tables with a pmhash index, index scans
# compared with a seqscan, REINDEX, detection of server crashes and
# restarts, reading, writing and finding the parts of an index file, and
# background psql sessions.
package PmhashFiles;

use strict;
use warnings;

use Exporter 'import';
use Fcntl qw(O_RDONLY O_WRONLY SEEK_SET);
use PmhashRecovery qw(new_node pmhash_dir pmh_files $VACUUM);
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(
  $FORCE_INDEX $FORCE_SEQ $UNIT
  start_new_node
  run_sql check_error_report expect_error reindex_hint damaged
  files_sql file_sql index_path all_index_files db_files file_mode
  make_table compare_with_seqscan reindex_and_check
  mark check_alive check_whole_logs
  read_bytes write_bytes change_byte find_segment crc32c
  start_session session_sql session_ok
  change_t check_t
);

our $FORCE_INDEX = 'SET enable_seqscan = off; SET enable_bitmapscan = off;';
our $FORCE_SEQ =
  'SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_seqscan = on;';
our $UNIT = 256;    # PMH_UNIT_SIZE

# Create and start a node (PmhashRecovery's new_node: dir => 'shm' or
# 'default', preload => 0) and, if pmhash is preloaded, create the extension
# in the database postgres.  Like every later start of it, its server runs
# with the test's own PMEM_IS_PMEM_FORCE.
sub start_new_node
{
	my ($name, %opt) = @_;
	my $node = new_node($name, %opt);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pmhash') if $opt{preload} // 1;
	return $node;
}

# Run SQL with verbose error reports; returns (exit code, stdout, stderr).
# %params go to Cluster::psql (timeout, timed_out).
sub run_sql
{
	my ($node, $db, $sql, %params) = @_;
	my ($rc, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql", %params);
	return ($rc, $out, $err);
}

# Check that an error report matches $want: state (SQLSTATE), msg, detail, hint.
sub check_error_report
{
	my ($err, $want, $name) = @_;
	like($err, qr/ERROR:  \Q$want->{state}\E: /, "$name: SQLSTATE $want->{state}")
	  if $want->{state};
	like($err, qr/ERROR:  .*$want->{msg}/, "$name: message") if $want->{msg};
	like($err, qr/DETAIL:  .*$want->{detail}/, "$name: detail") if $want->{detail};
	like($err, qr/HINT:  .*$want->{hint}/, "$name: hint") if $want->{hint};
}

# Run SQL that must fail, and check its error report.
sub expect_error
{
	my ($node, $db, $sql, $want, $name) = @_;
	my ($rc, $out, $err) = run_sql($node, $db, $sql);
	isnt($rc, 0, "$name: fails");
	check_error_report($err, $want, $name);
}

# What a REINDEX hint for an index looks like.
sub reindex_hint
{
	my ($index) = @_;
	return qr/Rebuild the index with REINDEX INDEX \Q$index\E\./;
}

# The error report of a damaged index, with a detail pattern.
sub damaged
{
	my ($index, $detail) = @_;
	return {
		state => 'XX002',
		msg => qr/pmhash index "\Q$index\E" is damaged/,
		detail => $detail,
		hint => reindex_hint($index)
	};
}

# SQL computing the file names of the pmhash indexes matching a condition on
# pg_class c, computed from the relfilenode (tB_ prefix for temporary ones).
sub files_sql
{
	my ($cond) = @_;
	return qq{SELECT CASE WHEN c.relpersistence = 't'
		THEN 't' || substring(pg_relation_filepath(c.oid) from '/t(\\d+)_\\d+\$') || '_'
		ELSE '' END
	 || d.oid || '_' || pg_relation_filenode(c.oid) || '.pmh'
	FROM pg_class c JOIN pg_am a ON a.oid = c.relam, pg_database d
	WHERE a.amname = 'pmhash' AND d.datname = current_database() AND $cond
	ORDER BY 1};
}

# SQL computing the file name of one index.
sub file_sql
{
	my ($index) = @_;
	return files_sql("c.oid = '$index'::regclass");
}

# Absolute path of an index's file.
sub index_path
{
	my ($node, $db, $index) = @_;
	return pmhash_dir($node) . '/' . $node->safe_psql($db, file_sql($index));
}

# Sorted file names of every pmhash index of a database the session can see.
sub all_index_files
{
	my ($node, $db) = @_;
	return sort split /\n/, $node->safe_psql($db, files_sql('true'));
}

# Sorted names of the .pmh files of one database in a node's pmhash.directory.
sub db_files
{
	my ($node, $dboid) = @_;
	return grep { /^(?:t\d+_)?${dboid}_\d+\.pmh$/ } pmh_files($node);
}

# Permission bits of a file, as an octal string.
sub file_mode
{
	my ($path) = @_;
	my @st = stat $path or return 'missing';
	return sprintf '%04o', $st[2] & 07777;
}

# Create a table (id int, k int) with $rows rows, keys id % $keys, and a pmhash index on k.
sub make_table
{
	my ($node, $db, $table, $rows, $keys, $kind) = @_;
	$kind //= '';
	$node->safe_psql($db,
		    "CREATE $kind TABLE $table (id int, k int); "
		  . "INSERT INTO $table SELECT i, i % $keys FROM generate_series(1, $rows) i; "
		  . "CREATE INDEX ${table}_k ON $table USING pmhash (k);");
}

# SQL listing, for every key from $from to $to, the ids of the rows having it.
sub probe_sql
{
	my ($table, $col, $from, $to) = @_;
	return "SELECT string_agg(v || ':' || coalesce((SELECT string_agg(id::text, ',' ORDER BY id) "
	  . "FROM $table WHERE $col = v), '-'), ' ' ORDER BY v) FROM generate_series($from, $to) v";
}

# Check that index scans of $index find what a seqscan finds for keys
# $from..$to; with allow_damaged, an XX002 error is accepted instead.
sub compare_with_seqscan
{
	my ($node, $db, $index, $table, $col, $from, $to, $name, %opt) = @_;
	my $sql = probe_sql($table, $col, $from, $to);
	like($node->safe_psql($db, "$FORCE_INDEX EXPLAIN (COSTS OFF) $sql"),
		qr/Index Scan using \Q$index\E /, "$name: the plan uses $index");
	my $via_seq = $node->safe_psql($db, "$FORCE_SEQ $sql");
	like($via_seq, qr/\d+:\d/, "$name: the table has rows to find");
	my ($rc, $via_index, $err) = run_sql($node, $db, "$FORCE_INDEX $sql");
	if ($rc != 0 && $opt{allow_damaged})
	{
		note "$name: index scans report: $err";
		check_error_report($err, damaged($index, qr/./), "$name: index scan error");
		return;
	}
	is($rc, 0, "$name: index scans succeed") or diag $err;
	is($via_index, $via_seq, "$name: index scans agree with a seqscan");
}

# REINDEX an index and check that it is sound and agrees with a seqscan.
sub reindex_and_check
{
	my ($node, $db, $index, $table, $col, $from, $to, $name) = @_;
	my ($rc, $out, $err) = run_sql($node, $db, "REINDEX INDEX $index");
	is($rc, 0, "$name: REINDEX succeeds") or diag $err;
	compare_with_seqscan($node, $db, $index, $table, $col, $from, $to, "$name after REINDEX");
	is($node->safe_psql($db, "SELECT pmhash_verify('$index')"),
		$node->safe_psql($db, "SELECT count($col) FROM $table"),
		"$name: pmhash_verify passes after REINDEX");
}

# The postmaster's start time and the log's current length, to detect crashes later.
sub mark
{
	my ($node) = @_;
	return {
		start => $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
		offset => -s $node->logfile
	};
}

# Check that the server neither restarted nor logged a crash since $mark.
sub check_alive
{
	my ($node, $mark, $name) = @_;
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
		$mark->{start}, "$name: server did not restart");
	my $log = slurp_file($node->logfile, $mark->{offset});
	unlike($log, qr/terminated by signal|was terminated|PANIC|reinitializing|TRAP:/,
		"$name: no crash in the server log");
}

# Stop the nodes, then check that no whole server log of theirs shows a crash.
sub check_whole_logs
{
	my (@nodes) = @_;
	$_->stop for @nodes;
	for my $node (@nodes)
	{
		unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|TRAP:/,
			'no crash in the whole log of node ' . $node->name);
	}
}

# Read $len bytes at $offset of a file.
sub read_bytes
{
	my ($path, $offset, $len) = @_;
	sysopen(my $fh, $path, O_RDONLY) or die "open $path: $!";
	sysseek($fh, $offset, SEEK_SET) or die "seek $path: $!";
	my $buf = '';
	(sysread($fh, $buf, $len) // -1) == $len or die "short read of $path at $offset";
	close $fh;
	return $buf;
}

# Overwrite bytes at $offset of a file in place (its size does not change).
sub write_bytes
{
	my ($path, $offset, $bytes) = @_;
	my $size = -s $path;
	sysopen(my $fh, $path, O_WRONLY) or die "open $path: $!";
	sysseek($fh, $offset, SEEK_SET) or die "seek $path: $!";
	(syswrite($fh, $bytes) // -1) == length $bytes or die "short write to $path";
	close $fh;
	die "size of $path changed" unless -s $path == $size;
}

# Replace the byte at $offset of a file by $change->(old byte value).
sub change_byte
{
	my ($path, $offset, $change) = @_;
	my $old = ord read_bytes($path, $offset, 1);
	write_bytes($path, $offset, chr($change->($old) & 0xFF));
}

# CRC-32C, as PostgreSQL and pmhash compute it.
sub crc32c
{
	my ($data) = @_;
	my $crc = 0xFFFFFFFF;
	for my $byte (unpack 'C*', $data)
	{
		$crc ^= $byte;
		$crc = ($crc & 1) ? (($crc >> 1) ^ 0x82F63B78) : ($crc >> 1) for 1 .. 8;
	}
	return $crc ^ 0xFFFFFFFF;
}

# Find a published segment in a file (one with posting blocks if asked):
# its shard, descriptor offset, first unit, buckets and posting blocks.
sub find_segment
{
	my ($path, $with_posting) = @_;
	my $shard_bits = unpack 'V', read_bytes($path, 40, 4);
	my $desc_unit = unpack 'Q<', read_bytes($path, 48, 8);
	my @desc = unpack 'Q<*', read_bytes($path, $desc_unit * $UNIT, 8 << $shard_bits);
	for my $shard (0 .. $#desc)
	{
		next unless $desc[$shard];
		my $unit = $desc[$shard] & ((1 << 40) - 1);
		my $nposting = unpack 'V', read_bytes($path, $unit * $UNIT + 44, 4);
		next if $with_posting && $nposting == 0;
		return {
			shard => $shard,
			desc_entry => $desc_unit * $UNIT + 8 * $shard,
			unit => $unit,
			nbuckets => $desc[$shard] >> 40,
			nposting => $nposting
		};
	}
	die "no suitable segment in $path";
}

# Start a background psql session that goes on after errors; %params go to
# Cluster::background_psql (timeout).
sub start_session
{
	my ($node, $db, %params) = @_;
	my $s = $node->background_psql($db, on_error_stop => 0, %params);
	$s->query('\set VERBOSITY verbose');
	return $s;
}

# Run SQL in a background session; returns its (stdout, stderr).
sub session_sql
{
	my ($s, $sql) = @_;
	$s->{stderr} = '';
	my $out = $s->query($sql);
	return ($out, $s->{stderr});
}

# Run SQL in a background session; it must succeed. Returns stdout.
sub session_ok
{
	my ($s, $sql, $name) = @_;
	my ($out, $err) = session_sql($s, $sql);
	is($err, '', "$name: no error") or diag $err;
	return $out;
}

# Table t (id int, k int) with pmhash index t_k, of the syncer's tests
# (020_sync_fallback, 022_slot_invalidated), and where it exists its twin
# th with hash index th_k, which goes through the same changes and checks:
# where hash answers, pmhash must too.  The next id change_t inserts.
my $next_t = 1;

# Whether a node has the hash twin th.
sub has_twin
{
	my ($node) = @_;
	return $node->safe_psql('postgres', "SELECT to_regclass('th') IS NOT NULL") eq 't';
}

# Inserts, deletes and a VACUUM on t (and th): writes whose sync commits
# leave to the syncer where it runs.
sub change_t
{
	my ($node) = @_;
	for my $table ('t', has_twin($node) ? ('th') : ())
	{
		$node->safe_psql('postgres',
			"INSERT INTO $table SELECT i, i % 53 FROM generate_series($next_t, $next_t + 2999) i; "
			  . "DELETE FROM $table WHERE id % 5 = 0 AND id >= $next_t; $VACUUM $table; "
			  . "INSERT INTO $table SELECT i, i % 53 FROM generate_series($next_t + 3000, $next_t + 3999) i");
	}
	$next_t += 4000;
	return;
}

# Index and bitmap scans of every key of t (and th) against a seqscan, and
# pmhash_verify.
sub check_t
{
	my ($node, $name) = @_;
	compare_with_seqscan($node, 'postgres', 't_k', 't', 'k', -1, 54, $name);
	is($node->safe_psql('postgres', "SELECT pmhash_verify('t_k')"),
		$node->safe_psql('postgres', 'SELECT count(k) FROM t'),
		"$name: pmhash_verify counts the keys");
	compare_with_seqscan($node, 'postgres', 'th_k', 'th', 'k', -1, 54, "$name, hash twin")
	  if has_twin($node);
	return;
}

1;
