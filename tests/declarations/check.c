/*
 * Compares the facts of h5gds's own declarations with those of real
 * headers (own.c, real.c): every size, member offset and size, constant and
 * global id must agree. Prints each disagreement; returns their number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts.h"

#define MAX_FACTS 4096

int main(void)
{
    static decl_fact_t own[MAX_FACTS], real[MAX_FACTS];
    size_t n_own = decl_facts_own(own, MAX_FACTS), n_real = decl_facts_real(real, MAX_FACTS);
    if (n_own > MAX_FACTS || n_real != n_own) {
        printf("FAIL: %zu facts from the declarations, %zu from the real headers (room for %d)\n", n_own, n_real,
               MAX_FACTS);
        return 1;
    }
    int failures = 0;
    for (size_t i = 0; i < n_own; i++) {
        if (strcmp(own[i].name, real[i].name) != 0) {
            printf("FAIL: fact %zu is %s in one list and %s in the other\n", i, own[i].name, real[i].name);
            return 1;
        }
        if (own[i].value != real[i].value) {
            if (strncmp(own[i].name, "global id of ", 13) == 0)
                printf("FAIL: %s: the real headers' macro does not name the declared global\n", own[i].name);
            else
                printf("FAIL: %s: %.17Lg in python/native/decl, %.17Lg in %s\n", own[i].name, own[i].value,
                       real[i].value, H5GDS_DECL_REAL_LABEL);
            failures++;
        }
    }
    printf("%zu facts compared with %s: %d disagree\n", n_own, H5GDS_DECL_REAL_LABEL, failures);
    return failures;
}
