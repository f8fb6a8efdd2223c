"""The three node tables: each one's topic is in the topic contract, and each one's coin location
finds the coin in lines shaped like that table's."""

from hyperdata_sidecar.core.lineinfo import LineInfo, inspect_line
from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES
from hyperdata_sidecar.topics import load_contract

from test_core_lineinfo import EVENT_OF, envelope


def test_each_tables_topic_default_and_setting_are_the_contracts():
    defaults = {spec.name for spec in load_contract({})}
    renamed = {spec.name for spec in load_contract({t.topic_env: f"renamed-{t.dir_name}" for t in TABLES})}
    for table in TABLES:
        assert table.default_topic in defaults and f"renamed-{table.dir_name}" in renamed, table


def test_each_tables_coin_location_finds_the_coin_in_its_own_lines_and_not_in_the_others():
    for table in TABLES:
        for other in TABLES:
            result = inspect_line(table, envelope([EVENT_OF[other]("SOL")]))
            assert isinstance(result, LineInfo) == (other is table), (table.dir_name, other.dir_name)


def test_table_by_dir_finds_every_table_by_its_directory_name():
    assert [TABLE_BY_DIR[t.dir_name] for t in TABLES] == list(TABLES)
