#!/usr/bin/env python3
"""Clients for bench/flight.sh: all of payment_events pulled in N parallel
parts, into one pyarrow Table.

    flight_peers.py flight LOCATION N
        pyarrow.flight: GetFlightInfo for the named query `payment_events`
        with N partitions, then DoGet of every endpoint, each in its own thread
        with its own connection.
    flight_peers.py connectorx DB_URL N
        connectorx.read_sql(..., partition_on="id", partition_num=N,
        return_type="arrow"): N connections, one range of id each (no shared
        snapshot).

Prints one JSON line: rows and the number of parts read.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor


def flight(location, parts):
    import pyarrow as pa
    import pyarrow.flight as fl

    command = json.dumps({"query": "payment_events", "partitions": parts}).encode()
    info = fl.connect(location).get_flight_info(fl.FlightDescriptor.for_command(command))

    def read(endpoint):
        return fl.connect(location).do_get(endpoint.ticket).read_all()

    with ThreadPoolExecutor(len(info.endpoints)) as pool:
        table = pa.concat_tables(pool.map(read, info.endpoints))
    return table.num_rows, len(info.endpoints)


def connectorx(url, parts):
    import connectorx as cx

    query = "select * from payment_events"
    if parts == 1:
        table = cx.read_sql(url, query, return_type="arrow")
    else:
        table = cx.read_sql(url, query, partition_on="id", partition_num=parts, return_type="arrow")
    return table.num_rows, parts


def main():
    variant, target, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows, read = {"flight": flight, "connectorx": connectorx}[variant](target, parts)
    print(json.dumps({"rows": rows, "parts": read}))


if __name__ == "__main__":
    main()
