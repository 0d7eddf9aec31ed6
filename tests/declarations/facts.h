/* What both translation units of a declarations check record: each fact of
 * the generated list (gen_facts.py) as a name and a value. */
#ifndef H5GDS_DECL_FACTS_H
#define H5GDS_DECL_FACTS_H

#include <stddef.h>

typedef struct decl_fact {
    char name[160];
    long double value;
} decl_fact_t;

/* Fills facts (room for max) and returns how many there are. */
size_t decl_facts_own(decl_fact_t *facts, size_t max);
size_t decl_facts_real(decl_fact_t *facts, size_t max);

#endif
