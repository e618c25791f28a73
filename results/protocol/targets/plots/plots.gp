# Written by experiments/protocol/targets.py; run `gnuplot plots.gp` in this folder.
set key outside right top
set grid
do for [fmt in "png svg"] {
if (fmt eq "png") { set terminal pngcairo size 1000,600 noenhanced font "sans,10" } else { set terminal svg size 1000,600 noenhanced font "sans,10" dynamic }
set output "fresh_reduction_network-r5_first_touch.".fmt
set title "network-r5: fresh reduction vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r5_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-r5_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r5_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r5_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-r5_first_touch.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-r5_held.".fmt
set title "network-r5: fresh reduction vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r5_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-r5_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r5_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r5_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-r5_held.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-r5_held_thinned.".fmt
set title "network-r5: fresh reduction vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r5_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-r5_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r5_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r5_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-r5_held_thinned.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r5_first_touch.".fmt
set title "network-r5: speedup vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r5_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-r5_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r5_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r5_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-r5_first_touch.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r5_held.".fmt
set title "network-r5: speedup vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r5_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-r5_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r5_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r5_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-r5_held.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r5_held_thinned.".fmt
set title "network-r5: speedup vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r5_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-r5_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r5_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r5_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-r5_held_thinned.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "headline_network-r5.".fmt
set key below
set title "network-r5: headline cells vs target, both readings (median over each cell's seeds, 95% bootstrap CI; dashed black: 3x)"
set xlabel "target validation accuracy (%)"
set ylabel "baseline / cell (fresh examples, or wall-clock time)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "headline_network-r5.dat" index 0 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-r5.dat" index 1 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, speedup, first touch (old reading)", \
  "headline_network-r5.dat" index 2 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, fresh reduction, held (change 8)", \
  "headline_network-r5.dat" index 3 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, speedup, held (change 8)", \
  "headline_network-r5.dat" index 4 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e5-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-r5.dat" index 5 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e5-sb1000, speedup, first touch (old reading)", \
  "headline_network-r5.dat" index 6 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e5-sb1000, fresh reduction, held (change 8)", \
  "headline_network-r5.dat" index 7 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e5-sb1000, speedup, held (change 8)", \
  3 with lines dt 2 lc rgb "black" notitle
set key outside right top
set output "fresh_reduction_network-r2_first_touch.".fmt
set title "network-r2: fresh reduction vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r2_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-r2_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r2_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r2_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-r2_held.".fmt
set title "network-r2: fresh reduction vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r2_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-r2_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r2_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r2_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-r2_held_thinned.".fmt
set title "network-r2: fresh reduction vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-r2_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-r2_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-r2_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-r2_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r2_first_touch.".fmt
set title "network-r2: speedup vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r2_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-r2_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r2_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r2_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r2_held.".fmt
set title "network-r2: speedup vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r2_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-r2_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r2_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r2_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-r2_held_thinned.".fmt
set title "network-r2: speedup vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-r2_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-r2_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-r2_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-r2_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "headline_network-r2.".fmt
set key below
set title "network-r2: headline cells vs target, both readings (median over each cell's seeds, 95% bootstrap CI; dashed black: 3x)"
set xlabel "target validation accuracy (%)"
set ylabel "baseline / cell (fresh examples, or wall-clock time)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "headline_network-r2.dat" index 0 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-r2.dat" index 1 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, speedup, first touch (old reading)", \
  "headline_network-r2.dat" index 2 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, fresh reduction, held (change 8)", \
  "headline_network-r2.dat" index 3 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, speedup, held (change 8)", \
  "headline_network-r2.dat" index 4 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e2-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-r2.dat" index 5 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e2-sb1000, speedup, first touch (old reading)", \
  "headline_network-r2.dat" index 6 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e2-sb1000, fresh reduction, held (change 8)", \
  "headline_network-r2.dat" index 7 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e2-sb1000, speedup, held (change 8)", \
  3 with lines dt 2 lc rgb "black" notitle
set key outside right top
set output "fresh_reduction_network-split-r5_first_touch.".fmt
set title "network-split-r5: fresh reduction vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r5_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-split-r5_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r5_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r5_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-split-r5_first_touch.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-split-r5_held.".fmt
set title "network-split-r5: fresh reduction vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r5_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-split-r5_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r5_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r5_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-split-r5_held.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-split-r5_held_thinned.".fmt
set title "network-split-r5: fresh reduction vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r5_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "fresh_reduction_network-split-r5_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r5_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r5_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "fresh_reduction_network-split-r5_held_thinned.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r5_first_touch.".fmt
set title "network-split-r5: speedup vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r5_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-split-r5_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r5_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r5_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-split-r5_first_touch.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r5_held.".fmt
set title "network-split-r5: speedup vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r5_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-split-r5_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r5_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r5_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-split-r5_held.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r5_held_thinned.".fmt
set title "network-split-r5: speedup vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r5_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m6-sb1000", \
  "speedup_network-split-r5_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r5_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r5_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  "speedup_network-split-r5_held_thinned.dat" index 4 using 1:2:3:4 with yerrorlines lc 5 title "before_aug-e5-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "headline_network-split-r5.".fmt
set key below
set title "network-split-r5: headline cells vs target, both readings (median over each cell's seeds, 95% bootstrap CI; dashed black: 3x)"
set xlabel "target validation accuracy (%)"
set ylabel "baseline / cell (fresh examples, or wall-clock time)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "headline_network-split-r5.dat" index 0 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-split-r5.dat" index 1 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, speedup, first touch (old reading)", \
  "headline_network-split-r5.dat" index 2 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, fresh reduction, held (change 8)", \
  "headline_network-split-r5.dat" index 3 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, speedup, held (change 8)", \
  "headline_network-split-r5.dat" index 4 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e5-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-split-r5.dat" index 5 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e5-sb1000, speedup, first touch (old reading)", \
  "headline_network-split-r5.dat" index 6 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e5-sb1000, fresh reduction, held (change 8)", \
  "headline_network-split-r5.dat" index 7 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e5-sb1000, speedup, held (change 8)", \
  3 with lines dt 2 lc rgb "black" notitle
set key outside right top
set output "fresh_reduction_network-split-r2_first_touch.".fmt
set title "network-split-r2: fresh reduction vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r2_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-split-r2_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r2_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r2_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-split-r2_held.".fmt
set title "network-split-r2: fresh reduction vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r2_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-split-r2_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r2_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r2_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "fresh_reduction_network-split-r2_held_thinned.".fmt
set title "network-split-r2: fresh reduction vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "fresh-example reduction (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "fresh_reduction_network-split-r2_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "fresh_reduction_network-split-r2_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "fresh_reduction_network-split-r2_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "fresh_reduction_network-split-r2_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r2_first_touch.".fmt
set title "network-split-r2: speedup vs target, first touch (old reading); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r2_first_touch.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-split-r2_first_touch.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r2_first_touch.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r2_first_touch.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r2_held.".fmt
set title "network-split-r2: speedup vs target, held (change 8); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r2_held.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-split-r2_held.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r2_held.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r2_held.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "speedup_network-split-r2_held_thinned.".fmt
set title "network-split-r2: speedup vs target, held, thinned (change 8 check); median over each cell's seeds (table.txt), 95% bootstrap CI; censored medians (~) in table.txt"
set xlabel "target validation accuracy (%)"
set ylabel "wall-clock speedup (baseline / cell)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "speedup_network-split-r2_held_thinned.dat" index 0 using 1:2:3:4 with yerrorlines lc 1 title "adaptive-m3-sb1000", \
  "speedup_network-split-r2_held_thinned.dat" index 1 using 1:2:3:4 with yerrorlines lc 2 title "batch-e2", \
  "speedup_network-split-r2_held_thinned.dat" index 2 using 1:2:3:4 with yerrorlines lc 3 title "before_aug-e2-sb1000", \
  "speedup_network-split-r2_held_thinned.dat" index 3 using 1:2:3:4 with yerrorlines lc 4 title "before_aug-e4-sb1000", \
  2 with lines dt 2 lc rgb "black" notitle, \
  4 with lines dt 2 lc rgb "black" notitle, \
  5 with lines dt 2 lc rgb "black" notitle
set output "headline_network-split-r2.".fmt
set key below
set title "network-split-r2: headline cells vs target, both readings (median over each cell's seeds, 95% bootstrap CI; dashed black: 3x)"
set xlabel "target validation accuracy (%)"
set ylabel "baseline / cell (fresh examples, or wall-clock time)"
set xrange [86.9:90.6]
set yrange [0:*]
plot "headline_network-split-r2.dat" index 0 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-split-r2.dat" index 1 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 1 title "before_aug-e4-sb1000, speedup, first touch (old reading)", \
  "headline_network-split-r2.dat" index 2 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, fresh reduction, held (change 8)", \
  "headline_network-split-r2.dat" index 3 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 2 title "before_aug-e4-sb1000, speedup, held (change 8)", \
  "headline_network-split-r2.dat" index 4 using ($1+-0.03):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e2-sb1000, fresh reduction, first touch (old reading)", \
  "headline_network-split-r2.dat" index 5 using ($1+-0.01):2:3:4 with yerrorlines dt 2 lc 3 title "before_aug-e2-sb1000, speedup, first touch (old reading)", \
  "headline_network-split-r2.dat" index 6 using ($1+0.01):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e2-sb1000, fresh reduction, held (change 8)", \
  "headline_network-split-r2.dat" index 7 using ($1+0.03):2:3:4 with yerrorlines dt 1 lc 4 title "before_aug-e2-sb1000, speedup, held (change 8)", \
  3 with lines dt 2 lc rgb "black" notitle
set key outside right top
}
