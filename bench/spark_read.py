#!/usr/bin/env python3
"""The timed part of bench/spark.sh: one Spark session (local[4], started
before any timing) reads payment_events with the actions `count()` and
`sum(amount)`, each timed alone (planning, reading and aggregating: the
action, not Spark's start), through

    sluice       sluice.spark, the named query `payment_events` (the whole
                 table: Python data sources cannot prune columns)
    sluice_cols  sluice.spark, the same query with option columns "id, amount":
                 the columns the actions need, all the database reads
    jdbc         Spark's JDBC reader with pgjdbc (partitionColumn=id between
                 lowerBound and upperBound, fetchsize 10000), which prunes the
                 columns itself
    database     no Spark: psql COPYs the rows each JDBC partition asks for
                 (count: `select 1`, sum: `amount`, the same id ranges, binary,
                 to /dev/null), all partitions at once: what PostgreSQL alone
                 takes to produce them on this machine, a floor for any reader

with each number of partitions, repetitions interleaved. Every result must
equal psql's (EXPECTED_COUNT, EXPECTED_SUM) or the run fails.

    spark_read.py LOCATION JDBC_URL ROWS REPS "1 2 4" SAMPLES_DIR

Appends one line "seconds" to SAMPLES_DIR/<variant>-<action>-<parts>.samples
per run.
"""

import os
import sys
import time
from pathlib import Path


def session():
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[4]")
        .appName("sluice-bench-spark")
        .config("spark.jars", os.environ.get("PGJDBC_JAR", "/usr/share/java/postgresql.jar"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import sluice.spark

    sluice.spark.register(spark)
    return spark


def frames(spark, location, jdbc_url, rows, parts):
    """The DataFrame of each variant with `parts` partitions."""

    def sluice(**options):
        reader = (spark.read.format("sluice").option("location", location).option("query", "payment_events")
                  .option("partitions", parts))
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    jdbc = spark.read.format("jdbc").option("url", jdbc_url).option("dbtable", "payment_events").option(
        "driver", "org.postgresql.Driver").option("fetchsize", 10000)
    if parts > 1:
        jdbc = jdbc.option("partitionColumn", "id").option("lowerBound", 1).option("upperBound", rows + 1).option(
            "numPartitions", parts)
    return {"sluice": sluice(), "sluice_cols": sluice(columns="id, amount"), "jdbc": jdbc.load()}


def database_alone(rows, parts, column):
    """Seconds for PostgreSQL to send every id range's `column` at once, to
    psql writing to /dev/null; psql's own work is next to nothing."""
    import subprocess

    url = os.environ["PLAIN_URL"]
    started = time.perf_counter()
    copies = []
    for index in range(parts):
        low, high = 1 + rows * index // parts, 1 + rows * (index + 1) // parts
        sql = (f"copy (select {column} from payment_events where id >= {low} and id < {high}) "
               "to stdout (format binary)")
        copies.append(subprocess.Popen(["psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
                                       stdout=subprocess.DEVNULL))
    if any(copy.wait() != 0 for copy in copies):
        sys.exit("psql failed to copy a part")
    return time.perf_counter() - started


def timed(action):
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def record(samples, name, seconds):
    with open(samples / f"{name}.samples", "a") as out:
        out.write(f"{seconds:.3f}\n")


def main():
    location, jdbc_url, rows, reps, part_counts, samples = sys.argv[1:7]
    rows, reps, part_counts, samples = int(rows), int(reps), [int(n) for n in part_counts.split()], Path(samples)
    expected = {"count": int(os.environ["EXPECTED_COUNT"]), "sum": os.environ["EXPECTED_SUM"]}
    from pyspark.sql import functions as F

    spark = session()
    actions = {
        "count": lambda frame: frame.count(),
        "sum": lambda frame: str(frame.agg(F.sum("amount")).collect()[0][0]),
    }
    for rep in range(1, reps + 1):
        for parts in part_counts:
            for variant, frame in frames(spark, location, jdbc_url, rows, parts).items():
                for name, action in actions.items():
                    seconds, result = timed(lambda: action(frame))
                    if result != expected[name]:
                        sys.exit(f"{variant} {name} with {parts} partitions gave {result}, psql {expected[name]}")
                    print(f"[spark] repetition {rep}/{reps}: {variant} {name}, {parts} partition(s): {seconds:.2f} s",
                          file=sys.stderr, flush=True)
                    record(samples, f"{variant}-{name}-{parts}", seconds)
            for name, column in (("count", "1"), ("sum", "amount")):
                seconds = database_alone(rows, parts, column)
                print(f"[spark] repetition {rep}/{reps}: PostgreSQL alone, {name}'s column, {parts} part(s): "
                      f"{seconds:.2f} s", file=sys.stderr, flush=True)
                record(samples, f"database-{name}-{parts}", seconds)
    spark.stop()


if __name__ == "__main__":
    main()
