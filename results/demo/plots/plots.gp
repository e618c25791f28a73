# Written by dataecho experiment; run `gnuplot plots.gp` in this folder.
set key outside right top
set grid
do for [fmt in "png svg"] {
if (fmt eq "png") { set terminal pngcairo size 1000,600 noenhanced font "sans,10" } else { set terminal svg size 1000,600 noenhanced font "sans,10" dynamic }
set output "fresh_vs_factor.".fmt
set title "demo".": fresh examples to target vs echo factor"
set xlabel "echo factor (adaptive: achieved)"
set ylabel "fresh examples to target (median, 95% bootstrap CI over seeds)"
set xrange [0.5:6.29034]
set yrange [0:*]
plot "fresh_vs_factor.dat" index 0 using 1:2:3:4 with yerrorlines title "adaptive, shuffle 1000", \
  "fresh_vs_factor.dat" index 1 using 1:2:3:4 with yerrorlines pt 7 ps 2 lc rgb "black" title "baseline", \
  "fresh_vs_factor.dat" index 2 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000", \
  315008 with lines dt 2 lc rgb "black" title "baseline (median)"
set output "accuracy_vs_fresh.".fmt
set title "demo".": accuracy on the evaluation set vs fresh examples read"
set xlabel "fresh examples read"
set ylabel "evaluation accuracy (the target's set)"
set xrange [0:*]
set yrange [*:*]
plot "accuracy_vs_fresh.dat" index 0 using 1:2 with linespoints title "baseline (seed 1)", \
  "accuracy_vs_fresh.dat" index 1 using 1:2 with linespoints title "adaptive-m6-sb1000 (seed 1)", \
  0.89 with lines dt 2 lc rgb "gray" title "target"
set output "speedup_vs_factor.".fmt
set title "demo".": wall-clock speedup to target vs echo factor"
set xlabel "echo factor (adaptive: achieved)"
set ylabel "speedup vs baseline (wall-clock time to target; median, 95% CI)"
set xrange [1:6.29034]
set yrange [0:*]
R = 6.72899
ideal(x) = x < R ? x : R
plot "speedup_vs_factor.dat" index 0 using 1:2:3:4 with yerrorlines title "adaptive, shuffle 1000", \
  "speedup_vs_factor.dat" index 1 using 1:2:3:4 with yerrorlines title "example before augmentation, shuffle 1000", \
  ideal(x) with lines dt 2 lc rgb "black" title "ideal min(e, R), R = 6.73 (baseline)", \
  1 with lines lc rgb "gray" notitle
}
