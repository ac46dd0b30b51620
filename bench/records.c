/*
 * records.c - JSON lines and CSV for the benchmark's figures (records.h).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "records.h"

static FILE *json_out, *csv_out;
static const char *target_label = "";

static FILE *open_append(const char *path)
{
    FILE *fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "a");
    if (!fp)
        perror(path);
    return fp;
}

static int is_empty(FILE *fp)
{
    struct stat st;
    return fp != stdout && fstat(fileno(fp), &st) == 0 && st.st_size == 0;
}

int records_open(const char *json_path, const char *csv_path, const char *label)
{
    target_label = label ? label : "";
    if (json_path && !(json_out = open_append(json_path)))
        return -1;
    if (csv_path && !(csv_out = open_append(csv_path)))
        return -1;
    if (csv_out && (csv_out == stdout || is_empty(csv_out)))
        fprintf(csv_out, "target,section,name,clients,round,per_sec,p50_ms,p99_ms,samples,"
                         "requests_per_acquisition,rate_vs_floor,rate_vs_floor_min,"
                         "rate_vs_floor_max,p50_vs_floor,p50_vs_floor_min,p50_vs_floor_max,"
                         "ratio_rounds,switches_per_acquisition,bytes_per_node\n");
    return 0;
}

static void json_string(FILE *fp, const char *s)
{
    putc('"', fp);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putc('\\', fp);
        putc(*s, fp);
    }
    putc('"', fp);
}

static void csv_string(FILE *fp, const char *s)
{
    putc('"', fp);
    for (; *s; s++) {
        if (*s == '"')
            putc('"', fp);
        putc(*s, fp);
    }
    putc('"', fp);
}

/* The ratio fields as JSON members: none without a ratio, no range without rounds. */
static void json_ratios(FILE *fp, const record_t *r)
{
    if (r->rate_vs_floor <= 0)
        return;
    fprintf(fp, ",\"rate_vs_floor\":%.4f,\"p50_vs_floor\":%.4f", r->rate_vs_floor,
            r->p50_vs_floor);
    if (r->ratio_rounds > 0)
        fprintf(fp, ",\"rate_vs_floor_min\":%.4f,\"rate_vs_floor_max\":%.4f,"
                    "\"p50_vs_floor_min\":%.4f,\"p50_vs_floor_max\":%.4f,\"ratio_rounds\":%ld",
                r->rate_vs_floor_min, r->rate_vs_floor_max, r->p50_vs_floor_min,
                r->p50_vs_floor_max, r->ratio_rounds);
}

/* The ratio columns, each empty where not given; starting with the comma after the last
 * column before them. */
static void csv_ratios(FILE *fp, const record_t *r)
{
    if (r->rate_vs_floor <= 0)
        fputs(",,,,,,,", fp);
    else if (r->ratio_rounds <= 0)
        fprintf(fp, ",%.4f,,,%.4f,,,0", r->rate_vs_floor, r->p50_vs_floor);
    else
        fprintf(fp, ",%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%ld", r->rate_vs_floor,
                r->rate_vs_floor_min, r->rate_vs_floor_max, r->p50_vs_floor,
                r->p50_vs_floor_min, r->p50_vs_floor_max, r->ratio_rounds);
}

void records_write(const record_t *r)
{
    if (json_out) {
        fputs("{\"target\":", json_out);
        json_string(json_out, target_label);
        fprintf(json_out, ",\"section\":\"%s\",\"name\":", r->section);
        json_string(json_out, r->name);
        fprintf(json_out, ",\"clients\":%d,\"round\":%ld,\"per_sec\":%.1f,\"p50_ms\":%.4f,"
                          "\"p99_ms\":%.4f,\"samples\":%ld", r->clients, r->round, r->rate,
                r->p50_ms, r->p99_ms, r->samples);
        if (r->requests_per_acquisition >= 0)
            fprintf(json_out, ",\"requests_per_acquisition\":%.2f",
                    r->requests_per_acquisition);
        json_ratios(json_out, r);
        if (r->switches_per_acquisition >= 0)
            fprintf(json_out, ",\"switches_per_acquisition\":%.2f",
                    r->switches_per_acquisition);
        if (r->bytes_per_node > 0)
            fprintf(json_out, ",\"bytes_per_node\":%.1f", r->bytes_per_node);
        fputs("}\n", json_out);
        fflush(json_out);
    }
    if (csv_out) {
        csv_string(csv_out, target_label);
        fprintf(csv_out, ",%s,", r->section);
        csv_string(csv_out, r->name);
        fprintf(csv_out, ",%d,%ld,%.1f,%.4f,%.4f,%ld,", r->clients, r->round, r->rate,
                r->p50_ms, r->p99_ms, r->samples);
        if (r->requests_per_acquisition >= 0)
            fprintf(csv_out, "%.2f", r->requests_per_acquisition);
        csv_ratios(csv_out, r);
        putc(',', csv_out);
        if (r->switches_per_acquisition >= 0)
            fprintf(csv_out, "%.2f", r->switches_per_acquisition);
        putc(',', csv_out);
        if (r->bytes_per_node > 0)
            fprintf(csv_out, "%.1f", r->bytes_per_node);
        putc('\n', csv_out);
        fflush(csv_out);
    }
}

void records_close(void)
{
    if (json_out && json_out != stdout)
        fclose(json_out);
    if (csv_out && csv_out != stdout)
        fclose(csv_out);
    json_out = csv_out = NULL;
}
