/*
 * test_paths.c - path validation, namespaces and path composition.
 *
 * The validation table mirrors ZooKeeper's PathUtils.validatePath: a path accepted here must
 * be accepted by the server, and one rejected here would be rejected there (or, for invalid
 * UTF-8, silently changed there).
 */
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "harness.h"

#include "zkit/common.h"
#include "zkit/ops.h"
#include "framework/paths.h"

typedef struct path_case {
    const char *path;
    int valid;
    const char *why;
} path_case_t;

static const path_case_t path_cases[] = {
    /* accepted */
    { "/", 1, "the root" },
    { "/a", 1, "one component" },
    { "/a/b", 1, "two components" },
    { "/a/b/c/d/e/f", 1, "deep path" },
    { "/zookeeper", 1, "the reserved subtree still validates" },
    { "/locks/_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-0000000007", 1, "Curator node" },
    { "/a.b", 1, "dot inside a name" },
    { "/.a", 1, "leading dot" },
    { "/a.", 1, "trailing dot" },
    { "/...", 1, "three dots is a name" },
    { "/a/..b", 1, "two dots and more is a name" },
    { "/with space", 1, "space" },
    { "/ ", 1, "space alone" },
    { "/~!@#$%^&*()_+-={}[]|:;'<>,?", 1, "printable ASCII punctuation" },
    { "/\xc3\xbcml\xc3\xa4ut", 1, "Latin-1 letters in UTF-8" },
    { "/\xe6\x97\xa5\xe6\x9c\xac", 1, "CJK" },
    { "/\xc2\xa0", 1, "U+00A0, just above the C1 controls" },
    { "/\xed\x9f\xbf", 1, "U+D7FF, just below the surrogates" },
    { "/\xef\xa4\x80", 1, "U+F900, just above the private use area" },
    { "/\xef\xbf\xaf", 1, "U+FFEF, just below the specials" },
    /* rejected */
    { NULL, 0, "NULL" },
    { "", 0, "empty" },
    { "a", 0, "relative" },
    { "a/b", 0, "relative with slash" },
    { "//", 0, "empty component under the root" },
    { "/a/", 0, "trailing slash" },
    { "/a//b", 0, "empty component in the middle" },
    { "/a/b//", 0, "double trailing slash" },
    { "/.", 0, "dot component" },
    { "/..", 0, "dot-dot component" },
    { "/a/.", 0, "trailing dot component" },
    { "/a/..", 0, "trailing dot-dot component" },
    { "/a/../b", 0, "dot-dot in the middle" },
    { "/./a", 0, "dot at the start" },
    { "/a\x01", 0, "U+0001" },
    { "/\x1f", 0, "U+001F" },
    { "/a\tb", 0, "tab" },
    { "/a\nb", 0, "newline" },
    { "/a\x7f", 0, "DEL" },
    { "/\xc2\x80", 0, "U+0080, first C1 control" },
    { "/\xc2\x9f", 0, "U+009F, last C1 control" },
    { "/\xed\xa0\x80", 0, "U+D800, an encoded surrogate" },
    { "/\xed\xbf\xbf", 0, "U+DFFF, an encoded surrogate" },
    { "/\xee\x80\x80", 0, "U+E000, private use" },
    { "/\xef\xa3\xbf", 0, "U+F8FF, last private use" },
    { "/\xef\xbf\xb0", 0, "U+FFF0, first special" },
    { "/\xef\xbf\xbd", 0, "U+FFFD, the replacement character" },
    { "/\xef\xbf\xbf", 0, "U+FFFF" },
    { "/\xf0\x9f\x98\x80", 0, "U+1F600: a surrogate pair in Java" },
    { "/\x80", 0, "lone continuation byte" },
    { "/\xc3", 0, "truncated two-byte sequence" },
    { "/\xc3(", 0, "bad continuation byte" },
    { "/\xe6\x97", 0, "truncated three-byte sequence" },
    { "/\xc0\xaf", 0, "overlong slash" },
    { "/\xe0\x80\xaf", 0, "overlong three-byte slash" },
    { "/\xf0\x80\x80\xaf", 0, "overlong four-byte slash" },
    { "/\xf4\x90\x80\x80", 0, "above U+10FFFF" },
    { "/\xfe", 0, "byte 0xFE" },
    { "/\xff", 0, "byte 0xFF" },
    { "/a/\xc3/b", 0, "truncated sequence before a slash" },
};

static void test_validation_table(void)
{
    size_t i;

    for (i = 0; i < sizeof(path_cases) / sizeof(path_cases[0]); i++) {
        const path_case_t *c = &path_cases[i];
        int expected = c->valid ? 0 : ZKIT_EBADPATH;

        CU_ASSERT_EQUAL(zkit__path_validate(c->path), expected);
        if (zkit__path_validate(c->path) != expected)
            CU_FAIL(c->why); /* names the failing row in the report */
    }
}

static void test_public_validate_matches_internal(void)
{
    size_t i;

    for (i = 0; i < sizeof(path_cases) / sizeof(path_cases[0]); i++)
        CU_ASSERT_EQUAL(zkit_path_validate(path_cases[i].path),
                        zkit__path_validate(path_cases[i].path));
}

static void test_long_path_is_valid(void)
{
    char path[4097];
    size_t i;

    /* "/aaa.../aaa..." with components of 63 characters: length alone is the server's limit. */
    for (i = 0; i < sizeof(path) - 1; i++)
        path[i] = i % 64 == 0 ? '/' : 'a';
    path[sizeof(path) - 1] = '\0';
    CU_ASSERT_EQUAL(zkit__path_validate(path), 0);
}

/* ---- namespaces ------------------------------------------------------------------------ */

static void test_namespace_validation(void)
{
    static const path_case_t cases[] = {
        { "app", 1, "one component" },
        { "app/sub", 1, "nested" },
        { "a.b-c_d", 1, "punctuation" },
        { "\xc3\xa4pp", 1, "UTF-8" },
        { NULL, 0, "NULL" },
        { "", 0, "empty" },
        { "/", 0, "slash alone" },
        { "/app", 0, "leading slash" },
        { "app/", 0, "trailing slash" },
        { "/app/", 0, "both slashes" },
        { "app//sub", 0, "empty component" },
        { ".", 0, "dot" },
        { "..", 0, "dot-dot" },
        { "app/..", 0, "dot-dot component" },
        { "app/./sub", 0, "dot component" },
        { "a\x01", 0, "control character" },
        { "\xff", 0, "invalid UTF-8" },
        { "\xee\x80\x80", 0, "private use" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int expected = cases[i].valid ? 0 : ZKIT_EBADPATH;

        CU_ASSERT_EQUAL(zkit__namespace_validate(cases[i].path), expected);
        if (zkit__namespace_validate(cases[i].path) != expected)
            CU_FAIL(cases[i].why);
    }
}

typedef struct ns_case {
    const char *ns;
    const char *path;  /* as the user sees it */
    const char *full;  /* as the server sees it */
} ns_case_t;

/* Each row holds both ways: fix(ns, path) == full and unfix(ns, full) == path. */
static const ns_case_t ns_cases[] = {
    { NULL, "/", "/" },
    { NULL, "/a", "/a" },
    { NULL, "/a/b", "/a/b" },
    { "", "/a", "/a" },
    { "app", "/", "/app" },
    { "app", "/a", "/app/a" },
    { "app", "/a/b", "/app/a/b" },
    { "app", "/app", "/app/app" },
    { "app/sub", "/", "/app/sub" },
    { "app/sub", "/lock", "/app/sub/lock" },
    { "app/sub", "/x/y/z", "/app/sub/x/y/z" },
};

static void test_fix_prefixes_namespace(void)
{
    size_t i;

    for (i = 0; i < sizeof(ns_cases) / sizeof(ns_cases[0]); i++) {
        char *full = zkit__path_fix(ns_cases[i].ns, ns_cases[i].path);

        CU_ASSERT_PTR_NOT_NULL_FATAL(full);
        CU_ASSERT_STRING_EQUAL(full, ns_cases[i].full);
        CU_ASSERT_EQUAL(zkit__path_validate(full), 0);
        free(full);
    }
}

static void test_unfix_strips_namespace(void)
{
    size_t i;

    for (i = 0; i < sizeof(ns_cases) / sizeof(ns_cases[0]); i++) {
        const char *path = zkit__path_unfix(ns_cases[i].ns, ns_cases[i].full);

        CU_ASSERT_PTR_NOT_NULL_FATAL(path);
        CU_ASSERT_STRING_EQUAL(path, ns_cases[i].path);
    }
}

static void test_unfix_points_into_full_path(void)
{
    const char *full = "/app/sub/lock";

    CU_ASSERT_PTR_EQUAL(zkit__path_unfix("app/sub", full), full + 8);
    CU_ASSERT_PTR_EQUAL(zkit__path_unfix(NULL, full), full);
}

static void test_unfix_leaves_paths_outside_namespace(void)
{
    static const ns_case_t outside[] = {
        { "app", NULL, "/other/a" },
        { "app", NULL, "/appx/a" },  /* a longer sibling is not inside */
        { "app", NULL, "/appx" },
        { "app", NULL, "/ap" },      /* a prefix of the namespace is not inside */
        { "app", NULL, "/" },
        { "app/sub", NULL, "/app/a" },
        { "app/sub", NULL, "/app" },
        { "app", NULL, "app/a" },    /* not absolute */
    };
    size_t i;

    for (i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
        CU_ASSERT_PTR_EQUAL(zkit__path_unfix(outside[i].ns, outside[i].full), outside[i].full);
    CU_ASSERT_PTR_NULL(zkit__path_unfix("app", NULL));
}

static void test_fix_null_path_gives_null(void)
{
    CU_ASSERT_PTR_NULL(zkit__path_fix("app", NULL));
    CU_ASSERT_PTR_NULL(zkit__path_fix(NULL, NULL));
}

/* ---- composition ----------------------------------------------------------------------- */

typedef struct join_case {
    const char *parent;
    const char *child;
    const char *joined;
} join_case_t;

static void test_join_puts_one_slash_between(void)
{
    static const join_case_t cases[] = {
        { "/", "a", "/a" },
        { "/a", "b", "/a/b" },
        { "/a/b", "c-0000000001", "/a/b/c-0000000001" },
        { "/a/", "b", "/a/b" },   /* tolerated slash on the parent */
        { "/a", "/b", "/a/b" },   /* tolerated slash on the child */
        { "/", "/a", "/a" },
        { "/a", "", "/a" },       /* nothing to add */
        { "/", "", "/" },
        { "", "a", "/a" },        /* an empty parent is the root */
        { "/a", "b/c", "/a/b/c" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *joined = zkit__path_join(cases[i].parent, cases[i].child);

        CU_ASSERT_PTR_NOT_NULL_FATAL(joined);
        CU_ASSERT_STRING_EQUAL(joined, cases[i].joined);
        free(joined);
    }
    CU_ASSERT_PTR_NULL(zkit__path_join(NULL, "a"));
    CU_ASSERT_PTR_NULL(zkit__path_join("/a", NULL));
}

static void test_parent_of_paths(void)
{
    static const char *const cases[][2] = {
        { "/a/b", "/a" },
        { "/a", "/" },
        { "/a/b/c", "/a/b" },
        { "/a.b/c.d", "/a.b" },
    };
    size_t i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *parent = zkit__path_parent(cases[i][0]);

        CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
        CU_ASSERT_STRING_EQUAL(parent, cases[i][1]);
        free(parent);
    }
}

static void test_root_and_non_paths_have_no_parent(void)
{
    CU_ASSERT_PTR_NULL(zkit__path_parent("/"));
    CU_ASSERT_PTR_NULL(zkit__path_parent(NULL));
    CU_ASSERT_PTR_NULL(zkit__path_parent(""));
    CU_ASSERT_PTR_NULL(zkit__path_parent("a"));
    CU_ASSERT_PTR_NULL(zkit__path_parent("a/b"));
}

static void test_basename_is_last_component(void)
{
    const char *path = "/a/b/_c_x-lock-0000000003";

    CU_ASSERT_STRING_EQUAL(zkit__path_basename("/a/b"), "b");
    CU_ASSERT_STRING_EQUAL(zkit__path_basename("/a"), "a");
    CU_ASSERT_STRING_EQUAL(zkit__path_basename("/"), "");
    CU_ASSERT_STRING_EQUAL(zkit__path_basename("name"), "name");
    CU_ASSERT_PTR_EQUAL(zkit__path_basename(path), path + 5);
    CU_ASSERT_PTR_NULL(zkit__path_basename(NULL));
}

static void test_join_of_parent_and_basename_gives_path_back(void)
{
    static const char *const paths[] = { "/a", "/a/b", "/a/b/c", "/x.y/_c_z-lock-0000000001" };
    size_t i;

    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        char *parent = zkit__path_parent(paths[i]);
        char *joined;

        CU_ASSERT_PTR_NOT_NULL_FATAL(parent);
        joined = zkit__path_join(parent, zkit__path_basename(paths[i]));
        CU_ASSERT_PTR_NOT_NULL_FATAL(joined);
        CU_ASSERT_STRING_EQUAL(joined, paths[i]);
        free(joined);
        free(parent);
    }
}

/* ---- registration ---------------------------------------------------------------------- */

/* Registered by test_unit.c. */
const zkh_test_t paths_tests[] = {
    ZKH_TEST(test_validation_table),
    ZKH_TEST(test_public_validate_matches_internal),
    ZKH_TEST(test_long_path_is_valid),
    ZKH_TEST(test_namespace_validation),
    ZKH_TEST(test_fix_prefixes_namespace),
    ZKH_TEST(test_unfix_strips_namespace),
    ZKH_TEST(test_unfix_points_into_full_path),
    ZKH_TEST(test_unfix_leaves_paths_outside_namespace),
    ZKH_TEST(test_fix_null_path_gives_null),
    ZKH_TEST(test_join_puts_one_slash_between),
    ZKH_TEST(test_parent_of_paths),
    ZKH_TEST(test_root_and_non_paths_have_no_parent),
    ZKH_TEST(test_basename_is_last_component),
    ZKH_TEST(test_join_of_parent_and_basename_gives_path_back),
    { NULL, NULL }
};
