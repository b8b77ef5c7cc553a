"""The hand-written peer of bench/serve_load.sh: what a careful team writes
instead of `sluice serve` for the same two endpoints, FastAPI + asyncpg.

    uvicorn serve_load_fastapi:app --app-dir bench --workers "$(nproc)" \
        --no-access-log --loop uvloop --http httptools --port 18491

Environment:
  SERVE_LOAD_PG_URL     database URL (required), plain TCP (ssl=False)
  SERVE_LOAD_POOL_SIZE  asyncpg pool size of each worker process (default 8);
                        the benchmark gives each worker its share of sluice's
                        pool, so both hold the same number of connections
  SERVE_LOAD_POOL_WAIT  seconds to wait for a pooled connection before
                        answering 503 with Retry-After: 1 (default 2, as
                        sluice's default pool_wait)

Routes (same SQL, same NDJSON rows as the sluice named queries):
  GET /account?account_id=N  short query: `fetch`, one body
  GET /stream?start=N        10,000 rows streamed with StreamingResponse from a
                             server-side cursor in a read-only transaction,
                             encoded and sent BATCH rows at a time

Rows are encoded with orjson (what a team that cares about speed uses):
numeric as a JSON number with its exact digits (Decimal -> orjson.Fragment,
as sluice writes it), timestamptz as RFC 3339 with the UTC offset, jsonb
embedded as the server's text (orjson.Fragment, no decode and re-encode).
"""

import asyncio
import os
import sys
from contextlib import asynccontextmanager
from decimal import Decimal

import asyncpg
import orjson
from fastapi import FastAPI
from fastapi.responses import Response, StreamingResponse

SHORT_SQL = "select * from payment_events where account_id = $1 order by id limit 10"
STREAM_SQL = "select * from payment_events where id between $1 and $1 + 9999 order by id"
BATCH = 1000  # rows per cursor fetch (one round trip) and per body chunk
NDJSON = "application/x-ndjson"

POOL_SIZE = int(os.environ.get("SERVE_LOAD_POOL_SIZE", "8"))
POOL_WAIT = float(os.environ.get("SERVE_LOAD_POOL_WAIT", "2"))
pool: asyncpg.Pool


def _default(value):
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(rows) -> bytes:
    dumps, option = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    return b"".join([dumps(dict(row), default=_default, option=option) for row in rows])


async def _init(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb", schema="pg_catalog", format="text", encoder=str, decoder=orjson.Fragment
    )


@asynccontextmanager
async def lifespan(_app: FastAPI):
    global pool
    pool = await asyncpg.create_pool(
        os.environ["SERVE_LOAD_PG_URL"], ssl=False, min_size=POOL_SIZE,
        max_size=POOL_SIZE, init=_init,
    )
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


def busy() -> Response:
    # One line per 503, so the benchmark can say what its errors were (there is
    # no access log).
    print("serve_load_fastapi: 503 no database connection free", file=sys.stderr, flush=True)
    return Response(
        orjson.dumps({"error": "no database connection free"}), status_code=503,
        media_type="application/json", headers={"Retry-After": "1"},
    )


@app.get("/account")
async def account(account_id: int) -> Response:
    try:
        conn = await pool.acquire(timeout=POOL_WAIT)
    except asyncio.TimeoutError:
        return busy()
    try:
        rows = await conn.fetch(SHORT_SQL, account_id)
    finally:
        await pool.release(conn)
    return Response(encode(rows), media_type=NDJSON)


async def _rows(conn: asyncpg.Connection, start: int):
    """The stream's chunks; releases the connection when done, failed or closed."""
    try:
        async with conn.transaction(readonly=True):
            cursor = await conn.cursor(STREAM_SQL, start)
            while rows := await cursor.fetch(BATCH):
                yield encode(rows)
    finally:
        await pool.release(conn)


async def _resume(first: bytes, rest):
    yield first
    async for chunk in rest:
        yield chunk


@app.get("/stream")
async def stream(start: int) -> Response:
    try:
        conn = await pool.acquire(timeout=POOL_WAIT)
    except asyncio.TimeoutError:
        return busy()
    rows = _rows(conn, start)
    # The first batch before the status line: an error there is a 500, not a
    # cut 200, and the generator has started, so closing it releases conn.
    try:
        first = await rows.__anext__()
    except StopAsyncIteration:
        return Response(b"", media_type=NDJSON)
    return StreamingResponse(_resume(first, rows), media_type=NDJSON)
