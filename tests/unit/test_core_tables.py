from hyperdata_sidecar.core.tables import TABLE_BY_DIR, TABLES, CoinLocation, TableSpec


def test_tables_hold_the_three_node_tables_with_their_topics_and_coin_locations():
    assert TABLES == (
        TableSpec(
            "node_raw_book_diffs_streaming", "TOPIC_BOOK_DIFFS", "hyperliquid.book-diffs", CoinLocation.EVENT
        ),
        TableSpec(
            "node_order_statuses_streaming",
            "TOPIC_ORDER_STATUSES",
            "hyperliquid.order-statuses",
            CoinLocation.ORDER,
        ),
        TableSpec("node_fills_streaming", "TOPIC_FILLS", "hyperliquid.fills", CoinLocation.FILL_TUPLE),
    )


def test_table_by_dir_finds_every_table_by_its_directory_name():
    assert TABLE_BY_DIR == {spec.dir_name: spec for spec in TABLES}
    assert len(TABLE_BY_DIR) == len(TABLES)
