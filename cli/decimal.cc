/* jf_cli_parse_decimal over fast_float::from_chars (see decimal.h). */
#include "decimal.h"

#include <cmath>

#include <fast_float/fast_float.h>

extern "C" int jf_cli_parse_decimal(const char *s, const char *e, double *out) {
    /* from_chars takes no '+' and, in its general format, also reads inf and nan: only text
     * whose first character after one sign is a digit or a point goes to it, the words stay
     * with the general parser */
    const char *p = s < e && *s == '+' ? s + 1 : s;
    const char *d = p == s && p < e && *p == '-' ? p + 1 : p;
    if (d == e || !((*d >= '0' && *d <= '9') || *d == '.')) return -1;
    double v;
    fast_float::from_chars_result r = fast_float::from_chars(p, e, v);
    if (r.ec != std::errc() || r.ptr != e || !std::isfinite(v)) return -1;
    *out = v;
    return 0;
}
