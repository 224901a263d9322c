/*
 * Golden files for the unit tests (see golden.h).
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sandboxd/sandboxd.h"
#include "golden.h"

const char *
golden_srcdir(void)
{
	const char	*d = getenv("HG_SRCDIR");

	return d != NULL && *d != '\0' ? d : ".";
}

char *
golden_slurp(const char *path)
{
	FILE	*f;
	char	*buf;
	long	 len;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == -1 || (len = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) == -1 || (buf = malloc(len + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	if (fread(buf, 1, len, f) != (size_t)len) {
		free(buf);
		fclose(f);
		return NULL;
	}
	buf[len] = '\0';
	fclose(f);
	return buf;
}

void
golden_check(const char *name, const char *text)
{
	char		 path[PATH_MAX];
	char		*want;
	const char	*update = getenv("HG_UPDATE_GOLDEN");
	FILE		*f;

	snprintf(path, sizeof(path), "%s/tests/unit/golden/%s",
	    golden_srcdir(), name);
	if (update != NULL && strcmp(update, "1") == 0) {
		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fputs(text, f) >= 0, 1);
		assert_int_equal(fclose(f), 0);
		return;
	}
	if ((want = golden_slurp(path)) == NULL)
		fail_msg("golden %s is missing (HG_UPDATE_GOLDEN=1 writes it)",
		    path);
	if (strcmp(want, text) != 0) {
		print_error("golden %s differs.\n--- golden\n%s\n--- now\n%s\n"
		    "(review, then HG_UPDATE_GOLDEN=1 rewrites it)\n", path,
		    want, text);
		free(want);
		fail();
	}
	free(want);
}

char *
golden_line(const struct strv *sv)
{
	char	*line, *out;

	line = strv_join(sv);
	if (asprintf(&out, "%s\n", line) == -1)
		fail();
	free(line);
	return out;
}
