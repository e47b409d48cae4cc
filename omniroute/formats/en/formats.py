"""Date and time formats of the admin (English): every time to the second, since operators
read cooldowns, locks and breaker openings that last seconds."""

DATETIME_FORMAT = "N j, Y, H:i:s"
TIME_FORMAT = "H:i:s"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s"
