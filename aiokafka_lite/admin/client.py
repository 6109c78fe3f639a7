"""`AdminClient`: one public class, composed of one part per area it manages.

Each area is a mixin in its own module, on the shared `AdminBase` (constructor,
lifecycle, the deadline of a call); they share no state beyond it. Mixins rather than
a facade over per-area objects, so every call stays a method of `AdminClient` with
its own signature and docstring, written once.
"""

from __future__ import annotations

from aiokafka_lite.admin.configs import ConfigsAdmin
from aiokafka_lite.admin.groups import GroupsAdmin
from aiokafka_lite.admin.records import RecordsAdmin
from aiokafka_lite.admin.topics import TopicsAdmin

__all__ = ["AIOKafkaAdminClient", "AdminClient"]


class AdminClient(TopicsAdmin, ConfigsAdmin, GroupsAdmin, RecordsAdmin):
    """Manage topics, configs, consumer groups, offsets and records of a Kafka cluster.

    Use it as ``async with AdminClient("localhost:9092") as admin: ...`` or call
    `start` and `close`. Security is given either as a ready `SecurityConfig`
    (``security=``) or with aiokafka's keyword arguments (``security_protocol``,
    ``ssl_context``, ``sasl_mechanism``, ...). ``api_version`` and
    ``connections_max_idle_ms`` are accepted for compatibility with aiokafka and
    otherwise unused (versions are negotiated per connection).
    """


#: aiokafka's name for the admin client.
AIOKafkaAdminClient = AdminClient
