// A Java consumer group member for the integration tests, run by the JDK's source
// launcher on the broker's classpath:
//   scripts/kafka-local tool tests/java/GroupMember.java BOOTSTRAP TOPIC GROUP PROTOCOL
// PROTOCOL is "classic" or "consumer" (KIP-848). It subscribes, prints "assigned N" once
// it owns partitions, consumes and commits until its standard input closes, then leaves
// the group and prints "left".
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
