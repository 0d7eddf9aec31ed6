/* Configuration of the gds driver: defaults, "key=value" parsing with
 * units, validation, and translation into the engine's settings. Kept out of
 * the callbacks file so each can be read on its own. */
#ifndef H5GDS_CONFIG_H
#define H5GDS_CONFIG_H

#include "H5FDgds.h"
#include "../engine/engine.h"

/* Environment variable read on every HDF5 version. */
#define H5GDS_CONFIG_ENV "H5GDS_CONFIG"

/* Built-in defaults only (no environment). */
void gds_config_defaults(H5FD_gds_config_t *config);
/* Applies `text`; on error pushes an HDF5 error naming key and value and
 * leaves `config` unchanged. `origin` says where the text came from. */
herr_t gds_config_apply(H5FD_gds_config_t *config, const char *text, const char *origin);
/* The configuration on a fapl (its driver info, else defaults + environment +
 * HDF5_DRIVER_CONFIG); *from_info (may be NULL) says which. */
herr_t gds_config_from_fapl(hid_t fapl_id, H5FD_gds_config_t *config, bool *from_info);
/* Checks a whole configuration (e.g. one set through the struct). */
herr_t gds_config_validate(const H5FD_gds_config_t *config);
/* H5FD_gds_config_init for the library's own use (no error printing: see gds_api_enter). */
herr_t gds_config_init(H5FD_gds_config_t *config);
/* The engine's settings. Values the device path cannot honour exactly are
 * rounded up (io_block_size to a multiple of fs_block_size, alignment to at
 * least fs_block_size, staging_size to a multiple of both); `note` (may be
 * NULL) then says which, for the `log` line, else is empty. */
void gds_config_to_engine(const H5FD_gds_config_t *config, gds_engine_settings_t *settings, char *note,
                          size_t note_size);

#endif
