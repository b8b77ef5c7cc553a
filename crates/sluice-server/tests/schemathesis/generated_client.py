"""Calls `sluice serve` through the client openapi-python-client generated
from its /openapi.json (run.sh generates it as the package `sluice_api`): a
named query's rows typed from its prepared statement, the batch route in its
JSON form, and POST /sql, each checked against the fixture's known values.
A client that names no format gets NDJSON, as the document says.

    python generated_client.py ADDRESS TOKEN
"""

import sys

from sluice_api import AuthenticatedClient
from sluice_api.api.default import account, account_batch, kinds, sql
from sluice_api.models import (
    AccountBatchJsonBodyItemType1,
    AccountBatchResponse200Item,
    AccountFormat,
    AccountRow,
    Error,
    KindsFormat,
    SqlBody,
    SqlFormat,
)


def check(condition, message):
    if not condition:
        raise SystemExit(f"generated client: {message}")


def main(address: str, token: str) -> None:
    client = AuthenticatedClient(base_url=address, token=token, raise_on_unexpected_status=True)

    rows = account.sync(client=client, id=7, format_=AccountFormat.JSON)
    check(isinstance(rows, list) and len(rows) == 1, f"account 7: {rows!r}")
    row = rows[0]
    check(isinstance(row, AccountRow), f"account 7 is not an AccountRow: {row!r}")
    check((row.id, row.owner, row.balance, row.active) == (7, "owner 7", 71.75, True), f"account 7: {row!r}")

    # What a client that names no format gets (httpx sends Accept: */*).
    plain = client.get_httpx_client().get("/queries/account", params={"id": 7})
    media = plain.headers.get("content-type", "")
    check(media.startswith("application/x-ndjson"), f"no format asked: {media}")

    kinds_rows = kinds.sync(client=client, format_=KindsFormat.JSON)
    check(len(kinds_rows) == 3, f"kinds: {kinds_rows!r}")
    first = kinds_rows[0].to_dict()
    check(first["big"] == 9007199254740993, f"int8 kept every digit: {first['big']!r}")
    check(first["exact"] == "NaN" and first["approximate"] == "Infinity", f"not finite: {first!r}")
    check(first["grid"] == [[1, 2], [3, None]], f"nested array: {first['grid']!r}")
    check(first["pair"] == {"a": 1, "b": "x"}, f"composite: {first['pair']!r}")
    check(first["moment"] == "infinity" and first["day"] == "0044-03-15 BC", f"moments: {first!r}")
    check(all(value is None for key, value in kinds_rows[1].to_dict().items() if key != "id"), "NULLs")

    by_name = AccountBatchJsonBodyItemType1.from_dict({"id": 2})
    results = account_batch.sync(client=client, body=[[1], by_name, [999999]])
    check(isinstance(results, list) and len(results) == 3, f"batch: {results!r}")
    check(all(isinstance(result, AccountBatchResponse200Item) for result in results), f"batch: {results!r}")
    found = [result.to_dict() for result in results]
    check([result["line"] for result in found] == [1, 2, 3], f"batch lines: {found!r}")
    check(found[0]["rows"][0]["owner"] == "owner 1" and found[1]["rows"][0]["id"] == 2, f"batch: {found!r}")
    check(found[2]["rows"] == [], f"no such account: {found[2]!r}")
    check(account_batch.sync(client=client, body=[]) == [], "an empty batch")

    answer = sql.sync(
        client=client,
        body=SqlBody(sql="select count(*) as n, sum(balance) as total from accounts where id <= $1", params=[10]),
        format_=SqlFormat.JSON,
    )
    check(not isinstance(answer, Error), f"POST /sql: {answer!r}")
    result = answer[0].to_dict()
    check(result == {"n": 10, "total": 563.75}, f"POST /sql: {result!r}")

    refused = sql.sync(client=client, body=SqlBody(sql="select * from no_such_table"), format_=SqlFormat.JSON)
    check(isinstance(refused, Error) and "no_such_table" in refused.error, f"a refused statement: {refused!r}")
    print("generated client: named query, batch and POST /sql answered as the document says")


if __name__ == "__main__":
    main(*sys.argv[1:])
