/*
 * map.c - pool geometry from the public API, and `keratin map`: a picture of a pool with one
 * line per zone row, one character per page or group of pages (see map.h).
 *
 * The picture is built in one walk of the open pool: the page kinds come from
 * kr_pool_page_kind(), the live bytes from one pass over the objects (kr_first/kr_next in
 * pool order, so the pages of consecutive objects arrive in order and a page shared by many
 * small objects is counted once), the damage from the on_page callback of one
 * kr_pool_check() without repair. Only per-character counts are kept, not per-page state,
 * so a large pool costs a few bytes per character drawn rather than per page. Text and SVG
 * are drawn from the same characters, with one table of names and colours.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "util.h"

#define P MAP_PAGE
#define MAP_WIDTH 100 /* columns of a text line, row label included */

/* ---------------------------------------------------------------------------------------
 * Geometry
 * ------------------------------------------------------------------------------------- */

int geom_load(kr_pool *pool, struct pool_geom *g)
{
	struct kr_pool_stat st;
	int rc = kr_pool_stat(pool, &st);
	if (rc)
		return rc;
	memset(g, 0, sizeof(*g));
	g->pool_size = st.pool_size;
	g->zone_size = st.zone_size;
	g->row_size = st.row_size;
	g->row_pages = st.row_size / P;
	g->nzones = st.nzones;
	g->rows = st.rows;

	/* The heap begins after the headers, control pages and primary lanes at the front of
	 * the file: the first page that belongs to a zone. */
	uint64_t off = 0;
	for (;;) {
		int kind = kr_pool_page_kind(pool, off);
		if (kind < 0)
			return kind;
		if (kind == KR_PAGE_ZONE_META || kind == KR_PAGE_DATA)
			break;
		off += P;
	}
	g->heap_off = off;
	g->heap_end = off + (uint64_t)g->nzones * g->zone_size;
	/* A zone ends with its parity row; anything else means this tool misreads the pool. */
	if (g->row_pages == 0 || g->heap_end > g->pool_size ||
	    kr_pool_page_kind(pool, g->heap_end - P) != KR_PAGE_PARITY)
		return KR_E_FORMAT_GEOMETRY;
	return KR_OK;
}

const char *geom_kind_name(int kind)
{
	switch (kind) {
	case KR_PAGE_HEADER: return "header";
	case KR_PAGE_CONTROL: return "control";
	case KR_PAGE_LANE: return "lane";
	case KR_PAGE_LANE_REPLICA: return "lane replica";
	case KR_PAGE_ZONE_META: return "zone metadata";
	case KR_PAGE_DATA: return "data";
	case KR_PAGE_PARITY: return "parity";
	case KR_PAGE_UNUSED: return "unused";
	}
	return "unknown";
}

const char *geom_describe(kr_pool *pool, uint64_t off, char *buf, size_t len)
{
	struct kr_location w = KR_LOCATION_INIT;
	if (kr_pool_locate(pool, off, &w) != KR_OK)
		snprintf(buf, len, "offset beyond the pool");
	else if (!w.in_zone)
		snprintf(buf, len, "%s page", geom_kind_name(w.kind));
	else if (w.kind == KR_PAGE_PARITY)
		snprintf(buf, len, "%s page, zone %u parity row column %u", geom_kind_name(w.kind),
			 w.zone, w.column);
	else
		snprintf(buf, len, "%s page, zone %u row %u column %u", geom_kind_name(w.kind), w.zone,
			 w.row, w.column);
	return buf;
}

/* ---------------------------------------------------------------------------------------
 * Check reports
 * ------------------------------------------------------------------------------------- */

void check_note_page(uint64_t *lowest, uint64_t off)
{
	if (*lowest == 0 || off + 1 < *lowest)
		*lowest = off + 1;
}

uint64_t check_first_bad(const struct kr_check_report *rep, uint64_t lowest)
{
	if (rep->first_bad_off)
		return rep->first_bad_off;
	return lowest ? lowest - 1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * What a character means
 * ------------------------------------------------------------------------------------- */

struct style {
	char ch;
	const char *name;
	const char *ansi; /* SGR parameters for a terminal */
	const char *rgb;  /* SVG fill */
};

static const struct style styles[] = {
	{'H', "header", "1;35", "#8e44ad"},
	{'C', "control", "35", "#c39bd3"},
	{'L', "lane", "33", "#d4a017"},
	{'R', "lane replica", "2;33", "#9a7d0a"},
	{'M', "zone metadata", "36", "#17a2b8"},
	{'#', "live object bytes", "32", "#2e9e4f"},
	{'.', "free", "90", "#dcdcdc"},
	{'P', "parity", "34", "#3a6fd8"},
	{'X', "damaged", "1;31", "#e8342b"},
	{'+', "repaired", "30;42", "#9be15d"},
	{'!', "unrepairable", "1;37;41", "#6e0000"},
	{'-', "unused", "90", "#f4f4f4"},
};
#define NSTYLES (sizeof(styles) / sizeof(styles[0]))

static const struct style *style_of(char ch)
{
	for (size_t i = 0; i < NSTYLES; i++)
		if (styles[i].ch == ch)
			return &styles[i];
	return &styles[NSTYLES - 1];
}

static char kind_char(int kind)
{
	switch (kind) {
	case KR_PAGE_HEADER: return 'H';
	case KR_PAGE_CONTROL: return 'C';
	case KR_PAGE_LANE: return 'L';
	case KR_PAGE_LANE_REPLICA: return 'R';
	case KR_PAGE_ZONE_META: return 'M';
	case KR_PAGE_DATA: return '.';
	case KR_PAGE_PARITY: return 'P';
	}
	return '-';
}

/* Damage is kept as a rank so that the worst state of a group wins: unrepairable over
 * damaged over repaired. */
static int damage_rank(int state)
{
	switch (state) {
	case KR_PAGE_REPAIRED: return 1;
	case KR_PAGE_DAMAGED: return 2;
	case KR_PAGE_UNREPAIRABLE: return 3;
	}
	return 0;
}

static const char damage_chars[] = {0, '+', 'X', '!'};

/* ---------------------------------------------------------------------------------------
 * Collecting the picture
 * ------------------------------------------------------------------------------------- */

/* A stretch of same-kind pages outside the heap (headers, control pages, lanes, ...). */
struct run {
	int kind;
	uint64_t off, pages;
	size_t first, width; /* its characters in the line of pages outside the heap */
};

struct pool_map {
	char *path;
	struct pool_geom g;
	struct kr_pool_stat st;
	uint64_t group;   /* pages per character */
	uint64_t cols;    /* characters per row */
	uint64_t nlines;  /* zone rows: nzones * (rows + 1) */
	unsigned labelw;  /* width of "row 99" / "parity" */
	uint64_t width;   /* characters a line has room for after the label */
	uint16_t *live;   /* per character: pages holding live object bytes */
	uint8_t *damage;  /* per character: worst damage rank */
	char *cells;      /* per character: what is drawn */
	struct run *runs;
	size_t nruns, heap_at; /* the heap lies between runs[heap_at - 1] and runs[heap_at] */
	char *other;           /* the line of pages outside the heap, and the damage there */
	uint8_t *other_damage;
	size_t other_len;
	uint64_t objects, payload, live_pages;
	uint64_t pages_by_state[4]; /* pages the check reported, by kr_page_state */
	uint64_t lowest;            /* see check_note_page() */
	struct kr_check_report rep;
	kr_pool *pool; /* during the check, for its on_page callback */
	int check_rc;
};

/* The character index of a heap offset, or -1 outside the heap. */
static int64_t cell_of(const struct pool_map *m, kr_pool *pool, uint64_t off)
{
	struct kr_location w = KR_LOCATION_INIT;
	if (kr_pool_locate(pool, off, &w) != KR_OK || !w.in_zone)
		return -1;
	uint64_t line = (uint64_t)w.zone * (m->g.rows + 1) + w.row;
	return (int64_t)(line * m->cols + w.column / m->group);
}

static int add_run(struct pool_map *m, int kind, uint64_t off)
{
	struct run *last = m->nruns ? &m->runs[m->nruns - 1] : NULL;
	if (last && last->kind == kind && last->off + last->pages * P == off) {
		last->pages++;
		return 0;
	}
	struct run *r = realloc(m->runs, (m->nruns + 1) * sizeof(*r));
	if (!r)
		return -1;
	m->runs = r;
	m->runs[m->nruns++] = (struct run){.kind = kind, .off = off, .pages = 1};
	return 0;
}

/* The pages in front of the heap and behind it, as runs of one kind each. */
static int collect_runs(struct pool_map *m, kr_pool *pool)
{
	m->heap_at = (size_t)-1;
	for (uint64_t off = 0; off < m->g.pool_size; off += P) {
		if (off == m->g.heap_off) {
			m->heap_at = m->nruns;
			off = m->g.heap_end - P;
			continue;
		}
		int kind = kr_pool_page_kind(pool, off);
		if (kind < 0)
			return kind;
		if (add_run(m, kind, off))
			return KR_E_NOMEM;
	}
	return KR_OK;
}

#define HEAP_MARK "[heap]"

/* Outside the heap the kinds differ wildly in size (two header pages, megabytes of lanes),
 * so each run gets its share of the line but at least one character: the line shows every
 * run in file order, not to scale. */
static int size_runs(struct pool_map *m)
{
	uint64_t total = 0;
	for (size_t i = 0; i < m->nruns; i++)
		total += m->runs[i].pages;
	/* One character each, and the rest of the line shared out by size. */
	uint64_t fixed = strlen(HEAP_MARK) + m->nruns;
	uint64_t spare = m->width > fixed ? m->width - fixed : 0;
	for (size_t i = 0; i < m->nruns; i++) {
		m->runs[i].first = m->other_len;
		m->runs[i].width = 1 + (size_t)(total ? m->runs[i].pages * spare / total : 0);
		m->other_len += m->runs[i].width;
	}
	m->other = malloc(m->other_len);
	m->other_damage = calloc(m->other_len, 1);
	return m->other && m->other_damage ? KR_OK : KR_E_NOMEM;
}

/* One pass over the objects: every page that holds some byte of an object (its 16-byte
 * header included) counts as live. Objects come in pool order, so a page is counted only
 * when it lies past the last one counted. */
static void collect_objects(struct pool_map *m, kr_pool *pool)
{
	struct util_progress bar;
	uint64_t next_page = 0; /* pages below it are counted */

	util_progress_init(&bar, "reading objects");
	for (kr_oid oid = kr_first(pool); oid; oid = kr_next(pool, oid)) {
		uint64_t size = kr_size(pool, oid), first = (oid - 16) / P, end = (oid + size - 1) / P + 1;
		m->objects++;
		m->payload += size;
		for (uint64_t page = first > next_page ? first : next_page; page < end; page++) {
			int64_t cell = cell_of(m, pool, page * P);
			if (cell >= 0 && m->live[cell] < UINT16_MAX)
				m->live[cell]++;
			m->live_pages++;
		}
		if (end > next_page)
			next_page = end;
		util_progress_cb(&bar, m->objects, m->st.nobjects);
	}
	util_progress_end(&bar);
}

/* Draws the page at off as damaged, repaired or unrepairable, unless something worse is
 * drawn there already. */
static void mark_page(struct pool_map *m, kr_pool *pool, uint64_t off, int state)
{
	int rank = damage_rank(state);
	int64_t cell = cell_of(m, pool, off);

	if (cell >= 0) {
		if (rank > m->damage[cell])
			m->damage[cell] = (uint8_t)rank;
		return;
	}
	/* Outside the heap: the character of the run that stands for this page. */
	for (size_t i = 0; i < m->nruns; i++) {
		const struct run *r = &m->runs[i];
		if (off < r->off || off >= r->off + r->pages * P)
			continue;
		size_t c = r->first + (size_t)((off - r->off) / P * r->width / r->pages);
		if (rank > m->other_damage[c])
			m->other_damage[c] = (uint8_t)rank;
	}
}

/* The check's on_page callback. */
static void on_page(void *ctx, uint64_t off, int state)
{
	struct pool_map *m = ctx;

	if (state >= 1 && state <= 3)
		m->pages_by_state[state]++;
	check_note_page(&m->lowest, off);
	mark_page(m, m->pool, off, state);
}

/* The character of one group of pages: damage over everything, else whatever most of its
 * pages are (zone metadata, live bytes, free space or parity; ties in that order). */
static char cell_char(const struct pool_map *m, kr_pool *pool, uint64_t cell)
{
	if (m->damage[cell])
		return damage_chars[m->damage[cell]];
	uint64_t line = cell / m->cols, c = cell % m->cols;
	uint64_t zone = line / (m->g.rows + 1), row = line % (m->g.rows + 1);
	uint64_t first = c * m->group, end = first + m->group;
	if (end > m->g.row_pages)
		end = m->g.row_pages;
	uint64_t base = m->g.heap_off + zone * m->g.zone_size + row * m->g.row_size;
	uint64_t meta = 0, data = 0, parity = 0;
	for (uint64_t p = first; p < end; p++) {
		int kind = kr_pool_page_kind(pool, base + p * P);
		meta += kind == KR_PAGE_ZONE_META;
		data += kind == KR_PAGE_DATA;
		parity += kind == KR_PAGE_PARITY;
	}
	uint64_t live = m->live[cell] < data ? m->live[cell] : data, free = data - live;
	if (meta && meta >= live && meta >= free && meta >= parity)
		return 'M';
	if (live && live >= free && live >= parity)
		return '#';
	return parity > free ? 'P' : '.';
}

size_t badblocks_read(const char *path, uint64_t **offs)
{
	char name[4096], line[64];
	size_t n = 0, cap = 0;

	*offs = NULL;
	if ((size_t)snprintf(name, sizeof(name), "%s.badblocks", path) >= sizeof(name))
		return 0;
	FILE *f = fopen(name, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		/* Decimal or 0x hex, as docs/FORMAT.md has it; the library ignores other lines. */
		uint64_t off;
		char *end;
		if (util_parse_number(line, &off, &end) || (*end != '\n' && *end != '\0'))
			continue;
		if (n == cap) {
			uint64_t *grown = realloc(*offs, (cap = cap ? 2 * cap : 16) * sizeof(**offs));
			if (!grown)
				break;
			*offs = grown;
		}
		(*offs)[n++] = off;
	}
	fclose(f);
	return n;
}

struct pool_map *map_collect(kr_pool *pool, const char *path, const uint64_t *repaired,
			     size_t nrepaired, int *rc)
{
	struct pool_map *m = calloc(1, sizeof(*m));
	if (!m) {
		*rc = KR_E_NOMEM;
		return NULL;
	}
	*rc = KR_E_NOMEM;
	m->path = strdup(path);
	if (!m->path || (*rc = geom_load(pool, &m->g)) || (*rc = kr_pool_stat(pool, &m->st)))
		goto fail;

	char label[32];
	m->labelw = (unsigned)snprintf(label, sizeof(label), "row %u", m->g.rows - 1);
	if (m->labelw < strlen("parity"))
		m->labelw = (unsigned)strlen("parity");
	m->width = MAP_WIDTH - 2 - m->labelw - 1;
	m->group = (m->g.row_pages + m->width - 1) / m->width;
	m->cols = (m->g.row_pages + m->group - 1) / m->group;
	m->nlines = (uint64_t)m->g.nzones * (m->g.rows + 1);
	uint64_t ncells = m->nlines * m->cols;
	m->live = calloc(ncells, sizeof(*m->live));
	m->damage = calloc(ncells, 1);
	m->cells = malloc(ncells);
	*rc = KR_E_NOMEM;
	if (!m->live || !m->damage || !m->cells || (*rc = collect_runs(m, pool)) ||
	    (*rc = size_runs(m)))
		goto fail;

	collect_objects(m, pool);
	for (size_t i = 0; i < nrepaired; i++)
		mark_page(m, pool, repaired[i] & ~(uint64_t)(P - 1), KR_PAGE_REPAIRED);

	struct util_busy busy;
	char h[UTIL_HUMAN_LEN];
	util_busy_begin(&busy, "checking %s (%s) ...", path, util_human(m->g.pool_size, h));
	m->rep.on_page = on_page;
	m->rep.ctx = m;
	m->pool = pool;
	m->check_rc = kr_pool_check(pool, 0, &m->rep);
	m->pool = NULL;
	util_busy_end(&busy);
	if (m->check_rc && KR_ERR_CLASS(m->check_rc) != KR_E_CORRUPT) {
		*rc = m->check_rc;
		goto fail;
	}

	for (uint64_t cell = 0; cell < ncells; cell++)
		m->cells[cell] = cell_char(m, pool, cell);
	for (size_t i = 0; i < m->nruns; i++)
		for (size_t c = m->runs[i].first; c < m->runs[i].first + m->runs[i].width; c++)
			m->other[c] = m->other_damage[c] ? damage_chars[m->other_damage[c]]
							 : kind_char(m->runs[i].kind);
	*rc = KR_OK;
	return m;
fail:
	map_free(m);
	return NULL;
}

int map_check_result(const struct pool_map *m) { return m->check_rc; }

void map_free(struct pool_map *m)
{
	if (!m)
		return;
	free(m->path);
	free(m->live);
	free(m->damage);
	free(m->cells);
	free(m->runs);
	free(m->other);
	free(m->other_damage);
	free(m);
}

/* ---------------------------------------------------------------------------------------
 * Drawing: shared layout
 * ------------------------------------------------------------------------------------- */

/* Where "[heap]" goes in the line of pages outside the heap. */
static size_t heap_mark_at(const struct pool_map *m)
{
	return m->heap_at < m->nruns ? m->runs[m->heap_at].first : m->other_len;
}

static void row_label(const struct pool_map *m, uint64_t line, char *buf, size_t len)
{
	uint32_t row = (uint32_t)(line % (m->g.rows + 1));
	if (row == m->g.rows)
		snprintf(buf, len, "parity");
	else
		snprintf(buf, len, "row %u", row);
}

static void scale_text(const struct pool_map *m, char *buf, size_t len)
{
	char h[UTIL_HUMAN_LEN];
	int n = snprintf(buf, len, "1 character = %llu page%s (%s)", (unsigned long long)m->group,
			 m->group == 1 ? "" : "s", util_human(m->group * P, h));
	if (m->group > 1)
		snprintf(buf + n, len - (size_t)n, "; it shows what most of them hold, or damage if any has it");
}

static void check_text(const struct pool_map *m, char *buf, size_t len)
{
	int n;
	if (m->check_rc == KR_OK)
		n = snprintf(buf, len, "check: sound");
	else
		n = snprintf(buf, len, "check: %llu damaged page%s, %llu unrepairable; first bad offset 0x%llx",
			     (unsigned long long)m->pages_by_state[KR_PAGE_DAMAGED],
			     m->pages_by_state[KR_PAGE_DAMAGED] == 1 ? "" : "s",
			     (unsigned long long)m->pages_by_state[KR_PAGE_UNREPAIRABLE],
			     (unsigned long long)check_first_bad(&m->rep, m->lowest));
	if (m->st.media_repairs)
		snprintf(buf + n, len - (size_t)n, "; the open repaired %llu page%s after media errors",
			 (unsigned long long)m->st.media_repairs, m->st.media_repairs == 1 ? "" : "s");
}

static void summary_text(const struct pool_map *m, char *buf, size_t len)
{
	char h[UTIL_HUMAN_LEN];
	snprintf(buf, len, "%llu object%s, %s of payload, on %llu page%s", (unsigned long long)m->objects,
		 m->objects == 1 ? "" : "s", util_human(m->payload, h), (unsigned long long)m->live_pages,
		 m->live_pages == 1 ? "" : "s");
}

static void title_text(const struct pool_map *m, char *buf, size_t len)
{
	char h[UTIL_HUMAN_LEN], r[UTIL_HUMAN_LEN];
	snprintf(buf, len, "%s: %s, %u zone%s of %u data rows + 1 parity row, %llu pages (%s) per row",
		 m->path, util_human(m->g.pool_size, h), m->g.nzones, m->g.nzones == 1 ? "" : "s",
		 m->g.rows, (unsigned long long)m->g.row_pages, util_human(m->g.row_size, r));
}

/* ---------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------- */

/* Characters with a colour change only where the character changes, reset at the end. */
static void put_chars(FILE *out, const char *s, size_t n, int color)
{
	char prev = 0;
	for (size_t i = 0; i < n; i++) {
		if (color && s[i] != prev)
			fprintf(out, "\033[0;%sm", style_of(s[i])->ansi);
		putc(s[i], out);
		prev = s[i];
	}
	if (color && n)
		fputs("\033[0m", out);
}

void map_print(const struct pool_map *m, FILE *out, int color)
{
	char buf[512];

	title_text(m, buf, sizeof(buf));
	fprintf(out, "%s\n", buf);
	scale_text(m, buf, sizeof(buf));
	fprintf(out, "%s\n\n", buf);

	size_t at = heap_mark_at(m);
	fprintf(out, "  %-*s ", m->labelw, "other");
	put_chars(out, m->other, at, color);
	fputs(HEAP_MARK, out);
	put_chars(out, m->other + at, m->other_len - at, color);
	fprintf(out, "\n  %-*s (headers, control pages, lanes and replicas in file order, not to scale)\n",
		m->labelw, "");

	for (uint64_t line = 0; line < m->nlines; line++) {
		if (line % (m->g.rows + 1) == 0)
			fprintf(out, "zone %llu\n", (unsigned long long)(line / (m->g.rows + 1)));
		row_label(m, line, buf, sizeof(buf));
		fprintf(out, "  %-*s ", m->labelw, buf);
		put_chars(out, m->cells + line * m->cols, m->cols, color);
		putc('\n', out);
	}

	fputs("\nlegend:", out);
	int col = 7;
	for (size_t i = 0; i < NSTYLES; i++) {
		int w = 2 + 2 + (int)strlen(styles[i].name);
		if (col + w > MAP_WIDTH) {
			fputs("\n       ", out);
			col = 7;
		}
		fputs("  ", out);
		put_chars(out, &styles[i].ch, 1, color);
		fprintf(out, " %s", styles[i].name);
		col += w;
	}
	summary_text(m, buf, sizeof(buf));
	fprintf(out, "\n%s\n", buf);
	check_text(m, buf, sizeof(buf));
	fprintf(out, "%s\n", buf);
}

/* ---------------------------------------------------------------------------------------
 * SVG
 * ------------------------------------------------------------------------------------- */

#define SVG_CW 8       /* a character's rectangle */
#define SVG_CH 12
#define SVG_PITCH 14   /* from one row to the next */
#define SVG_LEFT 64    /* room for the row labels */
#define SVG_LEGEND_W 150

/* Text content with the five characters XML gives meaning to escaped. */
static void svg_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: putc(*s, f);
		}
	}
}

static void svg_text(FILE *f, uint64_t x, uint64_t y, const char *extra, const char *s)
{
	fprintf(f, "<text x=\"%llu\" y=\"%llu\"%s>", (unsigned long long)x, (unsigned long long)y,
		extra);
	svg_escaped(f, s);
	fputs("</text>\n", f);
}

static void svg_rect(FILE *f, uint64_t x, uint64_t y, uint64_t w, char ch)
{
	fprintf(f, "<rect x=\"%llu\" y=\"%llu\" width=\"%llu\" height=\"%d\" fill=\"%s\"/>\n",
		(unsigned long long)x, (unsigned long long)y, (unsigned long long)w, SVG_CH,
		style_of(ch)->rgb);
}

int map_write_svg(const struct pool_map *m, FILE *f)
{
	char buf[512], h[UTIL_HUMAN_LEN];
	uint64_t runs_w = strlen(HEAP_MARK) + m->other_len;
	uint64_t grid_w = (m->cols > runs_w ? m->cols : runs_w) * SVG_CW;
	uint64_t width = SVG_LEFT + grid_w + 16;
	if (width < 4 * SVG_LEGEND_W + 16)
		width = 4 * SVG_LEGEND_W + 16;
	uint64_t legend_lines = (NSTYLES + 3) / 4;
	uint64_t grid_top = 96;
	uint64_t grid_h = m->nlines * SVG_PITCH + (uint64_t)m->g.nzones * 18;
	uint64_t height = grid_top + grid_h + 24 + legend_lines * 18 + 48;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%llu\" height=\"%llu\" "
		   "viewBox=\"0 0 %llu %llu\" font-family=\"monospace\" font-size=\"11\">\n",
		(unsigned long long)width, (unsigned long long)height, (unsigned long long)width,
		(unsigned long long)height);
	snprintf(buf, sizeof(buf), "keratin pool %s (%s)", m->path, util_human(m->g.pool_size, h));
	fputs("<title>", f);
	svg_escaped(f, buf);
	fputs("</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
	svg_text(f, 8, 20, " font-size=\"15\" font-weight=\"bold\"", buf);
	title_text(m, buf, sizeof(buf));
	svg_text(f, 8, 38, "", buf);
	scale_text(m, buf, sizeof(buf));
	svg_text(f, 8, 54, "", buf);

	/* Outside the heap, in file order, with a gap where the heap lies. */
	uint64_t y = 70, x = SVG_LEFT;
	svg_text(f, 8, y + 10, "", "other");
	for (size_t c = 0; c < m->other_len; c++) {
		if (c == heap_mark_at(m)) {
			svg_text(f, x, y + 10, "", HEAP_MARK);
			x += strlen(HEAP_MARK) * SVG_CW;
		}
		svg_rect(f, x, y, SVG_CW - 1, m->other[c]);
		x += SVG_CW;
	}

	y = grid_top;
	for (uint64_t line = 0; line < m->nlines; line++) {
		if (line % (m->g.rows + 1) == 0) {
			snprintf(buf, sizeof(buf), "zone %llu", (unsigned long long)(line / (m->g.rows + 1)));
			svg_text(f, 8, y + 12, " font-weight=\"bold\"", buf);
			y += 18;
		}
		row_label(m, line, buf, sizeof(buf));
		svg_text(f, 8, y + 10, "", buf);
		for (uint64_t c = 0; c < m->cols; c++)
			svg_rect(f, SVG_LEFT + c * SVG_CW, y, SVG_CW - 1, m->cells[line * m->cols + c]);
		y += SVG_PITCH;
	}

	y += 24;
	for (size_t i = 0; i < NSTYLES; i++) {
		uint64_t lx = 8 + (i % 4) * SVG_LEGEND_W, ly = y + (i / 4) * 18;
		fprintf(f, "<rect x=\"%llu\" y=\"%llu\" width=\"12\" height=\"12\" fill=\"%s\" stroke=\"#888\"/>\n",
			(unsigned long long)lx, (unsigned long long)ly, styles[i].rgb);
		snprintf(buf, sizeof(buf), "%c %s", styles[i].ch, styles[i].name);
		svg_text(f, lx + 18, ly + 10, "", buf);
	}
	y += legend_lines * 18 + 14;
	summary_text(m, buf, sizeof(buf));
	svg_text(f, 8, y, "", buf);
	check_text(m, buf, sizeof(buf));
	svg_text(f, 8, y + 16, "", buf);
	fputs("</svg>\n", f);

	/* A full disk shows up at the latest when the buffer is flushed by fclose(). */
	int failed = ferror(f);
	int err = errno;
	if (fclose(f) != 0)
		return -1;
	if (failed) {
		errno = err ? err : EIO;
		return -1;
	}
	return 0;
}
