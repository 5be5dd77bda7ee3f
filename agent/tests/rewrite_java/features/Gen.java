/** Stand-in for the generated fixture (the test overwrites it with generated methods). */
public class Gen {
    static String run() { return "gen"; }
}
