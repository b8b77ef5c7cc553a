"""Errors: sluice's reports become exceptions with their SQLSTATE and positions."""

import pytest

import sluice


def test_bad_sql_names_its_sqlstate_line_and_column(url):
    with pytest.raises(sluice.DatabaseError) as caught:
        sluice.read_arrow(url, "select 1,\n  2 3")
    error = caught.value
    assert error.sqlstate == "42601"
    assert (error.line, error.column) == (2, 5)
    assert error.kind == "database" and error.exit_code == 1
    assert "syntax error" in str(error)


def test_an_error_mid_stream_is_raised_not_a_short_table(url):
    with pytest.raises(sluice.DatabaseError) as caught:
        sluice.read_arrow(url, "select 1 / (100000 - g) from generate_series(1, 200000) g")
    assert caught.value.sqlstate == "22012"


def test_an_unreachable_server_is_a_connection_failure(url):
    with pytest.raises(sluice.ConnectionFailed) as caught:
        sluice.read_arrow("postgres://postgres@127.0.0.1:1/test?connect_timeout=2", "select 1")
    assert caught.value.kind == "connect"
    assert caught.value.sqlstate is None


def test_bad_settings_are_usage_errors(url):
    with pytest.raises(sluice.UsageError):
        sluice.read_arrow("nosuchdb://x", "select 1")
    with pytest.raises(sluice.UsageError):
        sluice.read_arrow(url, "select 1", no_such_setting=3)
    with pytest.raises(sluice.UsageError):
        sluice.read_arrow(url, "select $1::int", params=[None])


def test_every_error_is_a_sluice_error(url):
    with pytest.raises(sluice.Error):
        sluice.read_arrow(url, "select * from no_such_table_anywhere")
