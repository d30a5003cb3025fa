/*-------------------------------------------------------------------------
 *
 * pmh_file.c
 *	  File header, descriptor geometry and segment addressing.
 *
 * Copyright (c) 2026, pmhash developers
 *
 * IDENTIFICATION
 *	  src/core/pmh_file.c
 *
 *-------------------------------------------------------------------------
 */
#include <string.h>

#include "pmh_core.h"

/* Units taken by the descriptors of a file built with 2^shard_bits shards. */
uint64_t
pmh_descriptor_units(uint32_t shard_bits)
{
	return pmh_map_descriptor_units(pmh_map_make(shard_bits, 0, PMH_HEADER_UNITS));
}

/* pmh_header_check's answer for a file of the previous format version. */
const char	pmh_older_format[] = "file has the previous format version";

/* Fill in a new file header; the descriptors and segments follow it. */
void
pmh_header_init(PmhFileHeader *hdr, uint32_t spc_oid, uint32_t db_oid,
				uint32_t rel_node, int32_t backend, uint64_t build_generation,
				uint32_t shard_bits, uint32_t flags)
{
	memset(hdr, 0, sizeof(*hdr));
	hdr->magic = PMH_FILE_MAGIC;
	hdr->version = PMH_FORMAT_VERSION;
	hdr->header_units = PMH_HEADER_UNITS;
	hdr->spc_oid = spc_oid;
	hdr->db_oid = db_oid;
	hdr->rel_node = rel_node;
	hdr->backend = backend;
	hdr->build_generation = build_generation;
	hdr->shard_bits = shard_bits;
	hdr->flags = flags;
	hdr->desc_unit = PMH_HEADER_UNITS;
	hdr->data_unit = PMH_HEADER_UNITS + pmh_descriptor_units(shard_bits);
	hdr->checksum = pmh_header_checksum(hdr);
	hdr->shard_map = pmh_map_make(shard_bits, 0, hdr->desc_unit);
}

/* Units of the descriptor array of a map word. */
uint64_t
pmh_map_descriptor_units(uint64_t map)
{
	uint64_t	bytes = (uint64_t) pmh_map_room(map) * sizeof(uint64_t);

	return (bytes + PMH_UNIT_SIZE - 1) / PMH_UNIT_SIZE;
}

/*
 * Whether a map word can belong to a file of file_units units built with
 * 2^shard_bits shards: its level is that or more, its split pointer within
 * the level, and its descriptor array after the header and within the
 * file.
 */
int
pmh_map_fits(uint64_t map, uint32_t shard_bits, uint64_t file_units)
{
	uint32_t	level = pmh_map_level(map);
	uint64_t	unit = pmh_map_desc_unit(map);

	return level >= shard_bits && level <= PMH_MAX_SHARD_BITS &&
		pmh_map_split(map) < (UINT32_C(1) << level) &&
		pmh_map_slots(map) <= pmh_map_room(map) &&
		unit >= PMH_HEADER_UNITS && unit <= file_units &&
		pmh_map_descriptor_units(map) <= file_units - unit;
}

/* Checksum of the immutable part of the file header. */
uint32_t
pmh_header_checksum(const PmhFileHeader *hdr)
{
	return pmh_crc32c(hdr, offsetof(PmhFileHeader, checksum));
}

/* NULL if the header is sound for a file of file_units units, else why not. */
const char *
pmh_header_check(const PmhFileHeader *hdr, uint64_t file_units)
{
	if (file_units < PMH_HEADER_UNITS)
		return "file is shorter than its header";
	if (hdr->magic != PMH_FILE_MAGIC)
		return "file header has a wrong magic number";
	if (hdr->version == PMH_FORMAT_VERSION - 1)
		return pmh_older_format;
	if (hdr->version != PMH_FORMAT_VERSION)
		return "file format version is not supported";
	if (hdr->checksum != pmh_header_checksum(hdr))
		return "file header checksum mismatch";
	if (hdr->header_units != PMH_HEADER_UNITS ||
		hdr->shard_bits > PMH_MAX_SHARD_BITS ||
		hdr->desc_unit != PMH_HEADER_UNITS ||
		hdr->data_unit != PMH_HEADER_UNITS + pmh_descriptor_units(hdr->shard_bits))
		return "file header geometry is invalid";
	if (file_units < hdr->data_unit)
		return "file is shorter than its descriptors";
	if (!pmh_map_fits(hdr->shard_map, hdr->shard_bits, file_units))
		return "file header's shard map is invalid";
	return NULL;
}

/* Checksum of a segment header. */
uint32_t
pmh_segment_checksum(const PmhSegmentHeader *hdr)
{
	return pmh_crc32c(hdr, offsetof(PmhSegmentHeader, checksum));
}
