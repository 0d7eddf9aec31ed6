/*
 * The gds_mpio driver's single reads and writes (the read and write
 * callbacks): metadata to mpio; raw data through the engine, except a
 * collective call with MPI derived datatypes, which goes to mpio when no
 * rank has a device buffer (MPI-IO decodes the datatypes) and is refused
 * on every rank otherwise.
 */
#include "gds_mpio_internal.h"

static bool is_device(const void *buf)
{
    gds_buffer_info_t info;
    gds_classify_buffer(buf, &info);
    return info.kind == GDS_MEMORY_DEVICE;
}

static herr_t forward_read(gds_mpio_file_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    if (file->icls->read(file->inner, type, dxpl, addr, size, buf) < 0) {
        MPIO_ERROR(H5E_IO, H5E_READERROR, "the mpio driver underneath failed to read %zu bytes at %llu", size,
                   (unsigned long long)addr);
        return -1;
    }
    return 0;
}

static herr_t forward_write(gds_mpio_file_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size,
                            const void *buf)
{
    if (file->icls->write(file->inner, type, dxpl, addr, size, buf) < 0) {
        MPIO_ERROR(H5E_IO, H5E_WRITEERROR, "the mpio driver underneath failed to write %zu bytes at %llu", size,
                   (unsigned long long)addr);
        return -1;
    }
    return 0;
}

enum { HAS_DERIVED = 1, HAS_DEVICE = 2 };

/* A collective plain raw read/write: contiguous (MPI_BYTE) through the
 * engine; MPI derived datatypes through mpio when no rank has a device
 * buffer, refused everywhere otherwise. */
static herr_t plain_raw(gds_mpio_file_t *file, bool write, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    bool collective = gds_mpio_call_is_collective();
    if (collective) {
        MPI_Datatype btype = MPI_BYTE, ftype = MPI_BYTE;
        if (H5CX_get_mpi_coll_datatypes(&btype, &ftype) < 0) {
            btype = MPI_DATATYPE_NULL; /* unknown: treat as derived */
            ftype = MPI_DATATYPE_NULL;
        }
        int mine = (btype != MPI_BYTE || ftype != MPI_BYTE) ? HAS_DERIVED : 0, all = 0;
        if (size > 0 && is_device(buf))
            mine |= HAS_DEVICE;
        if (gds_mpio_agree_or(file, mine, &all) < 0)
            return -1;
        if (all & HAS_DERIVED) {
            if (all & HAS_DEVICE) {
                MPIO_ERROR(H5E_IO, write ? H5E_WRITEERROR : H5E_READERROR,
                           "collective raw-data %s with MPI derived datatypes from device memory (rank %d: %s "
                           "buffer): HDF5 chose this path because selection I/O is off for this call (type "
                           "conversion, H5Pset_selection_io off, a filtered dataset, or chunks HDF5's chunk "
                           "cache holds: H5Pset_chunk_cache(dapl, 0, 0, 1.0) on the dataset turns that off); "
                           "use selection I/O (the default), independent transfers, or H5Dwrite_gds/H5Dread_gds "
                           "staging",
                           write ? "write" : "read", file->mpi_rank, (mine & HAS_DEVICE) ? "device" : "host");
                return -1;
            }
            if (gds_mpio_drain(file) < 0)
                return -1;
            /* size counts elements of the memory datatype (one, the whole
             * selection, where it is derived): the bytes are its size */
            int type_bytes = 0;
            if (btype != MPI_DATATYPE_NULL && MPI_Type_size(btype, &type_bytes) == MPI_SUCCESS && type_bytes > 0)
                file->forwarded_bytes += size * (size_t)type_bytes;
            else
                file->forwarded_bytes += size;
            file->forwarded_calls++;
            return write ? forward_write(file, H5FD_MEM_DRAW, dxpl, addr, size, buf)
                         : forward_read(file, H5FD_MEM_DRAW, dxpl, addr, size, buf);
        }
    }
    gds_segment_t seg = {.offset = addr, .size = size, .buf = buf};
    return gds_mpio_raw_transfer(file, dxpl, write, size ? 1 : 0, &seg, collective, true);
}

herr_t gds_mpio_read(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    if (type != H5FD_MEM_DRAW)
        return forward_read(file, type, dxpl, addr, size, buf);
    return plain_raw(file, false, dxpl, addr, size, buf);
}

herr_t gds_mpio_write(H5FD_t *_file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    gds_mpio_file_t *file = (gds_mpio_file_t *)_file;
    if (type != H5FD_MEM_DRAW)
        return forward_write(file, type, dxpl, addr, size, buf);
    return plain_raw(file, true, dxpl, addr, size, (void *)buf);
}
