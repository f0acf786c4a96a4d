# A consumer group member on librdkafka through Confluent's Python client (confluent-kafka),
# for the integration tests (tests/common/python.rs runs it from the venv it makes):
#   .cache/venv/bin/python tests/python/group_member.py BOOTSTRAP TOPIC GROUP PROTOCOL CLIENT_ID
# PROTOCOL is "classic" or "consumer" (KIP-848); CLIENT_ID is its client.id.
# It subscribes, prints "assigned N" once it owns partitions, consumes until its standard
# input closes, then leaves the group (close) and prints "left".
# Everything else is the client's default, as an application that sets nothing gets it:
# no isolation.level (librdkafka's default, read_committed), offsets committed
# automatically (enable.auto.commit, every 5 s, and on close) for every record that poll()
# returned. auto.offset.reset=earliest, so that a new group reads what is already there.
# A classic member asks for the broker's minimum session timeout (6 s), as
# tests/java/GroupMember.java does; a KIP-848 member's timeouts are the group's
# (consumer.session.timeout.ms, consumer.heartbeat.interval.ms): the client sets none.
import sys
import threading

from confluent_kafka import Consumer


def main():
    bootstrap, topic, group, protocol, client_id = sys.argv[1:6]
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        config["session.timeout.ms"] = 6000
    stop = threading.Event()

    def watch_stdin():
        try:
            while sys.stdin.buffer.read(4096):
                pass
        finally:
            stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    consumer = Consumer(config)
    consumer.subscribe([topic])
    announced = False
    try:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and message.error() is not None:
                print(f"consumer error: {message.error()}", file=sys.stderr, flush=True)
            if not announced:
                assignment = consumer.assignment()
                if assignment:
                    print(f"assigned {len(assignment)}", flush=True)
                    announced = True
    finally:
        consumer.close()
    print("left", flush=True)


if __name__ == "__main__":
    main()
