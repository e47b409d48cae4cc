"""``manage.py rotatekeys``: re-encrypt every stored provider secret with the newest key.

Run it after putting a new key first in ``OMNIROUTE_ENCRYPTION_KEY`` (keep the old ones after
it until this has run), and once after upgrading from a gateway that derived its key from
``OMNIROUTE_SECRET_KEY``. It prints counts and connection ids, never a secret or ciphertext.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from routing.services.secrets import secrets_rotate


class Command(BaseCommand):
    help = "Re-encrypt every stored provider secret with the newest OMNIROUTE_ENCRYPTION_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        result = secrets_rotate()
        self.stdout.write(
            f"Re-encrypted {result.rotated} secret(s) with the newest key; "
            f"{result.current} already used it; {result.unreadable} unreadable."
        )
        if result.unreadable:
            ids = ", ".join(str(pk) for pk in result.unreadable_connections)
            raise CommandError(
                f"{result.unreadable} stored secret(s) decrypt with no configured key "
                f"(connections {ids}): add the key they were written with to "
                "OMNIROUTE_ENCRYPTION_KEY, or enter those secrets again."
            )
