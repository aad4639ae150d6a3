package dev.driftwarden.flink;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import javax.security.auth.login.AppConfigurationEntry;

import org.apache.flink.kafka.shaded.org.apache.kafka.clients.admin.Admin;
import org.apache.flink.kafka.shaded.org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.config.types.Password;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.JaasContext;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.security.ssl.DefaultSslEngineFactory;
import org.apache.flink.kafka.shaded.org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.core.type.TypeReference;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * What the Flink Kafka connector's Java client makes of the properties {@code source.security} is translated
 * into (config providers resolved, the JAAS option parsed, the PEM key and certificates loaded), and whether it
 * can list a broker's topics with them. The tests compare it with librdkafka's translation; a property map is
 * JSON text, each answer JSON text. {@link #main} answers requests on stdin, one JSON object a line, in a process
 * of its own (the environment it resolves {@code env} secrets from is the one it was started with).
 */
public final class KafkaClientCheck {
    private static final ObjectMapper MAPPER = new ObjectMapper();

    private KafkaClientCheck() {}

    /** The client's view of {@code propertiesJson}: protocol, SASL login module and options, TLS material. */
    public static String resolve(String propertiesJson) throws Exception {
        Map<String, Object> props = properties(propertiesJson);
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:1");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        ConsumerConfig config = new ConsumerConfig(props);
        Map<String, ?> values = config.values();
        Map<String, Object> out = new HashMap<>();
        out.put("protocol", config.getString("security.protocol"));
        out.put("mechanism", config.getString("sasl.mechanism"));
        if (config.getPassword("sasl.jaas.config") != null) {
            AppConfigurationEntry entry = JaasContext.loadClientContext(values).configurationEntries().get(0);
            out.put("login_module", entry.getLoginModuleName());
            out.put("username", entry.getOptions().get("username"));
            out.put("password", entry.getOptions().get("password"));
        }
        out.put("endpoint_identification", config.getString("ssl.endpoint.identification.algorithm"));
        out.put("truststore_type", config.getString("ssl.truststore.type"));
        out.put("truststore_location", config.getString("ssl.truststore.location"));
        out.put("keystore_type", config.getString("ssl.keystore.type"));
        out.put("keystore_key", text(config.getPassword("ssl.keystore.key")));
        out.put("keystore_chain", text(config.getPassword("ssl.keystore.certificate.chain")));
        out.put("key_password", text(config.getPassword("ssl.key.password")));
        if (config.getString("security.protocol").endsWith("SSL")) {
            out.put("ssl_engine", sslEngine(values));
        }
        return MAPPER.writeValueAsString(out);
    }

    /** "ok: N topics" when an admin client with these properties lists the topics of {@code bootstrap}, else the
     * error's class and message. */
    public static String listTopics(String propertiesJson, String bootstrap, int timeoutMs) throws Exception {
        Properties props = new Properties();
        props.putAll(properties(propertiesJson));
        props.put("bootstrap.servers", bootstrap);
        props.put("default.api.timeout.ms", Integer.toString(timeoutMs));
        props.put("request.timeout.ms", Integer.toString(timeoutMs));
        try (Admin admin = Admin.create(props)) {
            int topics = admin.listTopics().names().get(timeoutMs, TimeUnit.MILLISECONDS).size();
            return "ok: " + topics + " topics";
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage();
        } catch (TimeoutException e) {
            return "TimeoutException: no answer within " + timeoutMs + " ms";
        } catch (RuntimeException e) {  // the client could not be made (a key that does not load, ...)
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            return e.getClass().getSimpleName() + ": " + e.getMessage() + " (" + root.getClass().getSimpleName()
                    + ": " + root.getMessage() + ")";
        }
    }

    /**
     * Reads requests from stdin, one a line ({@code {"op": "resolve", "properties": {...}}} or
     * {@code {"op": "list_topics", "properties": {...}, "bootstrap": "...", "timeout_ms": N}}), and prints
     * one answer a line: the JSON of {@link #resolve}, or {@code {"result": "..."}} of {@link #listTopics};
     * an exception as {@code {"error": "Class: message"}}.
     */
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            Map<String, Object> request = MAPPER.readValue(line, new TypeReference<Map<String, Object>>() {});
            String properties = MAPPER.writeValueAsString(request.get("properties"));
            String answer;
            try {
                answer = "resolve".equals(request.get("op")) ? resolve(properties)
                        : MAPPER.writeValueAsString(Map.of("result", listTopics(properties,
                                (String) request.get("bootstrap"), ((Number) request.get("timeout_ms")).intValue())));
            } catch (Exception e) {
                answer = MAPPER.writeValueAsString(Map.of("error", e.getClass().getSimpleName() + ": " + e.getMessage()));
            }
            System.out.println(answer);
            System.out.flush();
        }
    }

    private static Map<String, Object> properties(String json) throws Exception {
        return new HashMap<>(MAPPER.readValue(json, new TypeReference<Map<String, Object>>() {}));
    }

    private static String sslEngine(Map<String, ?> values) {
        try (DefaultSslEngineFactory factory = new DefaultSslEngineFactory()) {
            factory.configure(values);
            return "ok";
        } catch (Exception e) {
            return e.getClass().getSimpleName() + ": " + e.getMessage();
        }
    }

    private static String text(Password password) {
        return password == null ? null : password.value();
    }
}
