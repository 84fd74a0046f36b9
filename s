       0.9  p4 (1 boot1)
       0.8  p5 (1 boot1)
