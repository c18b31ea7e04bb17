"""Analytics: Spark over what kinesim holds (delivered objects as tables, streams as streaming sources)."""
