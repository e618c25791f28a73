# Written by dataecho experiment; run `gnuplot plots.gp` in this folder.
set key outside right top
set grid
do for [fmt in "png svg"] {
if (fmt eq "png") { set terminal pngcairo size 1000,600 noenhanced font "sans,10" } else { set terminal svg size 1000,600 noenhanced font "sans,10" dynamic }
set output "fresh_vs_factor.".fmt
set title "protocol-controls".": fresh examples to target vs echo factor"
set xlabel "echo factor (adaptive: achieved)"
set ylabel "fresh examples to target (median, 95% bootstrap CI over seeds)"
set xrange [0.5:5.5]
set yrange [0:*]
plot "fresh_vs_factor.dat" index 0 using 1:2:3:4 with yerrorlines pt 7 ps 2 lc rgb "black" title "baseline, baseline-s1950", \
  "fresh_vs_factor.dat" index 1 using 1:2:3:4 with yerrorlines pt 7 ps 2 lc rgb "black" title "baseline, baseline-s2925", \
  "fresh_vs_factor.dat" index 2 using 1:2:3:4 with yerrorlines pt 7 ps 2 lc rgb "black" title "baseline, baseline-s5850", \
  "fresh_vs_factor.dat" index 3 using 1:2:3:4 with yerrorlines title "example after augmentation, shuffle 1000", \
  "fresh_vs_factor.dat" index 4 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e4-sb1000-s1950", \
  "fresh_vs_factor.dat" index 5 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e4-sb1000-s2925", \
  "fresh_vs_factor.dat" index 6 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e4-sb1000-s5850", \
  "fresh_vs_factor.dat" index 7 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e5-sb1000-s1950", \
  "fresh_vs_factor.dat" index 8 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e5-sb1000-s2925", \
  "fresh_vs_factor.dat" index 9 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000, before aug-e5-sb1000-s5850"
set output "accuracy_vs_fresh.".fmt
set title "protocol-controls".": accuracy on the evaluation set vs fresh examples read"
set xlabel "fresh examples read"
set ylabel "evaluation accuracy (the target's set)"
set xrange [0:*]
set yrange [*:*]
plot "accuracy_vs_fresh.dat" index 0 using 1:2 with linespoints title "before_aug-e5-sb1000-s1950 (seed 1)", \
  0.9 with lines dt 2 lc rgb "gray" title "target"
}
