/* The body of decl_facts_own/decl_facts_real: included by own.c and real.c
 * after their headers, with H5GDS_FACTS_FUNCTION naming the function. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "facts.h"

#define H5GDS_STR(x) #x
#define H5GDS_XSTR(x) H5GDS_STR(x)

static size_t put(decl_fact_t *facts, size_t n, size_t max, const char *name, long double value)
{
    if (n < max) {
        snprintf(facts[n].name, sizeof facts[n].name, "%s", name);
        facts[n].value = value;
    }
    return n + 1;
}

#ifdef H5GDS_FACTS_REAL
/* 1 when the macro's expansion names the global as a whole token. */
static inline int names_global(const char *expansion, const char *global)
{
    size_t len = strlen(global);
    for (const char *p = strstr(expansion, global); p; p = strstr(p + 1, global)) {
        int before = p == expansion || !(p[-1] == '_' || (p[-1] >= '0' && p[-1] <= '9') ||
                                         ((p[-1] | 0x20) >= 'a' && (p[-1] | 0x20) <= 'z'));
        char c = p[len];
        int after = !(c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'));
        if (before && after)
            return 1;
    }
    return 0;
}
#define H5GDS_FACT_GLOBAL(name, global) n = put(facts, n, max, "global id of " #name, names_global(H5GDS_XSTR(name), global));
#else
#define H5GDS_FACT_GLOBAL(name, global) n = put(facts, n, max, "global id of " #name, 1);
#endif

#define H5GDS_FACT_SIZE(type) n = put(facts, n, max, "sizeof(" #type ")", (long double)sizeof(type));
#define H5GDS_FACT_OFFSET(type, member)                                                                      \
    n = put(facts, n, max, "offsetof(" #type ", " #member ")", (long double)offsetof(type, member));        \
    n = put(facts, n, max, "sizeof(" #type "." #member ")", (long double)sizeof(((type *)0)->member));
#define H5GDS_FACT_VALUE(name) n = put(facts, n, max, #name, (long double)(name));
#define H5GDS_FACT_POINTER(name) n = put(facts, n, max, #name, (long double)(uintptr_t)(name));
#define H5GDS_FACT_LIST(name)                                                                                \
    {                                                                                                        \
        static const long long list[] = name;                                                               \
        n = put(facts, n, max, "elements of " #name, (long double)(sizeof list / sizeof list[0]));          \
        for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {                                          \
            char label[160];                                                                                 \
            snprintf(label, sizeof label, "%s[%zu]", #name, i);                                              \
            n = put(facts, n, max, label, (long double)list[i]);                                             \
        }                                                                                                    \
    }

size_t H5GDS_FACTS_FUNCTION(decl_fact_t *facts, size_t max)
{
    size_t n = 0;
#include H5GDS_FACTS_LIST
    return n;
}
