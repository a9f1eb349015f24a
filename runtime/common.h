/* Definitions every internal module shares: symbol visibility, status codes and printf checks.
 *
 * Internal functions are declared JF_INTERNAL so the shared library exports only the documented
 * API of include/jitfit.h (Lua's LUAI_FUNC idea).
 */
#ifndef JF_COMMON_H
#define JF_COMMON_H

#include "../include/jitfit.h"

#if defined(__GNUC__) && !defined(JF_TESTING_EXPORT_ALL)
#define JF_INTERNAL __attribute__((visibility("hidden")))
#else
#define JF_INTERNAL
#endif

#if defined(__GNUC__)
#define JF_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define JF_PRINTF(fmt, args)
#endif

#endif
