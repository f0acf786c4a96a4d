// A Kafka Streams application of the streams rebalance protocol (KIP-1071) for the
// integration tests, run by the JDK's source launcher on the broker's classpath:
//   scripts/kafka-local tool tests/java/StreamsApp.java BOOTSTRAP INPUT OUTPUT APPLICATION_ID
// Its topology copies INPUT to OUTPUT through mapValues; APPLICATION_ID names its streams
// group. It prints "tasks N" whenever the number of its active tasks changes, commits
// every 200 ms, and when its standard input closes it leaves the group, closes and
// prints "left".
import java.nio.file.Files;
import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;

public class StreamsApp {
    private static volatile boolean stop = false;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        // Each instance its own state directory: two run side by side on one host.
        props.put(StreamsConfig.STATE_DIR_CONFIG,
            Files.createTempDirectory("streams-app").toString());
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<byte[], byte[]>stream(args[1]).mapValues(v -> v).to(args[2]);

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

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.start();
        int announced = -1;
        while (!stop) {
            int tasks = 0;
            for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
                tasks += thread.activeTasks().size();
            }
            if (tasks != announced) {
                System.out.println("tasks " + tasks);
                System.out.flush();
                announced = tasks;
            }
            Thread.sleep(100);
        }
        streams.close(CloseOptions.groupMembershipOperation(
            CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(Duration.ofSeconds(30)));
        System.out.println("left");
        System.out.flush();
    }
}
