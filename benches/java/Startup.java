/** The smallest program: what a JVM start costs with the agent (scripts/startup_cost.sh). */
public class Startup {
    public static void main(String[] args) {
        System.out.println("started");
    }
}
