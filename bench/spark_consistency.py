#!/usr/bin/env python3
"""The consistency part of bench/spark.sh: while a writer moves money between
the accounts of `bench_accounts` (ACCOUNTS accounts of 100 each, so every
consistent read totals 100 × ACCOUNTS), Spark reads the table READS times in
4 partitions through Spark's JDBC reader (partitionColumn=id: each partition
its own query, at its own moment) and through sluice.spark (one Flight plan:
every partition in one snapshot), and sums the balances.

    spark_consistency.py LOCATION JDBC_URL ACCOUNTS READS OUTPUT

Writes one line per read to OUTPUT: "<reader> <rows> <total>".
"""

import sys

from spark_read import session


def main():
    location, jdbc_url, accounts, reads, output = sys.argv[1:6]
    accounts, reads = int(accounts), int(reads)
    from pyspark.sql import functions as F

    spark = session()
    jdbc = (spark.read.format("jdbc").option("url", jdbc_url).option("dbtable", "bench_accounts")
            .option("driver", "org.postgresql.Driver").option("partitionColumn", "id")
            .option("lowerBound", 1).option("upperBound", accounts + 1).option("numPartitions", 4).load())
    flight = (spark.read.format("sluice").option("location", location).option("query", "accounts")
              .option("partitions", 4).load())
    with open(output, "w") as out:
        for read in range(1, reads + 1):
            for reader, frame in (("jdbc", jdbc), ("sluice", flight)):
                row = frame.agg(F.count("*").alias("rows"), F.sum("balance").alias("total")).collect()[0]
                print(f"[spark] consistency read {read}/{reads}: {reader} {row['rows']} rows, total {row['total']}",
                      file=sys.stderr, flush=True)
                out.write(f"{reader} {row['rows']} {row['total']}\n")
    spark.stop()


if __name__ == "__main__":
    main()
