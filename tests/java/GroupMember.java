// A Java consumer group member for the integration tests, run by the JDK's source
// launcher on the broker's classpath:
//   scripts/kafka-local tool tests/java/GroupMember.java BOOTSTRAP TOPIC GROUP PROTOCOL [CLIENT_ID]
// PROTOCOL is "classic" or "consumer" (KIP-848); CLIENT_ID, when given, is its client.id.
// It subscribes, prints "assigned N" once it owns partitions, consumes and commits until
// its standard input closes, then leaves the group and prints "left".
// A classic member asks for the broker's minimum session timeout (6 s), so that the
// coordinator notices a killed member within seconds; it heartbeats at the client's
// default (every 3 s): the others learn of the rebalance from their next heartbeat. A
// KIP-848 member's timeouts are the group's (consumer.session.timeout.ms,
// consumer.heartbeat.interval.ms): the client sets none.
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupMember {
    private static volatile boolean stop = false;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("group.protocol", args[3]);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (args.length > 4) {
            props.put("client.id", args[4]);
        }
        if (args[3].equals("classic")) {
            props.put("session.timeout.ms", "6000");
        }
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (Exception e) {
                // closed
            }
            stop = true;
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]));
            boolean announced = false;
            while (!stop) {
                if (!consumer.poll(Duration.ofMillis(200)).isEmpty()) {
                    consumer.commitSync();
                }
                if (!announced && !consumer.assignment().isEmpty()) {
                    System.out.println("assigned " + consumer.assignment().size());
                    System.out.flush();
                    announced = true;
                }
            }
        }
        System.out.println("left");
        System.out.flush();
    }
}
