import java.util.*;
import java.util.function.*;
import java.util.stream.*;

/** Lambdas, method references, streams, indy string concatenation, switch on strings and enums. */
public class Lambdas {
    enum Color { RED, GREEN, BLUE }

    interface Shape { double area(); default String describe() { return getClass().getSimpleName() + " " + area(); } }
    record Circle(double r) implements Shape { public double area() { return Math.round(Math.PI * r * r * 100) / 100.0; } }
    record Rect(double w, double h) implements Shape { public double area() { return w * h; } }

    static String colorName(Color c) {
        switch (c) {
            case RED: return "r";
            case GREEN: return "g";
            default: return "b";
        }
    }

    static int word(String s) {
        switch (s) {
            case "one": return 1;
            case "two": return 2;
            case "three": return 3;
            case "Aa": return 10;   // same hashCode as "BB"
            case "BB": return 11;
            default: return -1;
        }
    }

    static String arrow(Object o) {
        return switch (o.getClass().getSimpleName()) {
            case "Integer" -> "int " + o;
            case "String" -> "str " + o;
            default -> "other";
        };
    }

    static int twice(IntUnaryOperator f, int x) { return f.applyAsInt(f.applyAsInt(x)); }

    public static void main(String[] args) {
        List<String> words = Arrays.asList("delta", "alpha", "charlie", "bravo", "echo", "alpha");
        System.out.println(words.stream().distinct().sorted().collect(Collectors.joining(",")));
        Map<Integer, Long> byLen = new TreeMap<>(words.stream().collect(Collectors.groupingBy(String::length, Collectors.counting())));
        System.out.println(byLen);
        System.out.println(IntStream.rangeClosed(1, 100).filter(i -> i % 7 == 0).map(i -> i * i).sum());
        Function<Integer, Integer> inc = x -> x + 1;
        Function<Integer, Integer> dbl = x -> x * 2;
        System.out.println(inc.andThen(dbl).compose(dbl).apply(5));
        Supplier<List<String>> sup = ArrayList::new;
        List<String> l = sup.get();
        l.add("x");
        BiFunction<String, Integer, String> rep = String::repeat;
        System.out.println(rep.apply("ab", 3) + l);
        int base = 10;
        System.out.println(twice(x -> x * base, 3));
        Runnable r = () -> System.out.println("runnable ran");
        r.run();
        String a = "a"; int n = 3; long big = 1L << 40; char c = 'z'; double d = 0.5; boolean b = true; Object o = null;
        System.out.println("concat " + a + n + big + c + d + b + o + Color.BLUE);
        for (Color col : Color.values()) System.out.print(colorName(col) + col.ordinal() + " ");
        System.out.println();
        for (String w : new String[] {"one", "two", "three", "Aa", "BB", "none"}) System.out.print(word(w) + " ");
        System.out.println();
        System.out.println(arrow(1) + "; " + arrow("s") + "; " + arrow(2.0));
        List<Shape> shapes = List.of(new Circle(1), new Rect(2, 3));
        shapes.forEach(s -> System.out.println(s.describe() + " " + s));
        Optional<String> first = words.stream().filter(w -> w.startsWith("c")).findFirst();
        System.out.println(first.map(String::toUpperCase).orElse("none"));
        Comparator<String> cmp = Comparator.comparing(String::length).thenComparing(Comparator.reverseOrder());
        List<String> sorted = new ArrayList<>(words);
        sorted.sort(cmp);
        System.out.println(sorted);
        System.out.println(Stream.iterate(1, x -> x * 3).limit(10).reduce(0, Integer::sum));
    }
}
